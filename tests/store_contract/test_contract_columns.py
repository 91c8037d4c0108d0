"""``load`` hands the analysis columns, on both stores: arrays per run field and per metric, no object per run.

The per-run objects (``Dataset.runs`` / ``values``) are views built only when
a caller reads them; the comparison reads the arrays, so it must leave the
views unbuilt.
"""

from __future__ import annotations

import numpy as np

from contract_helpers import plan, record, start
from perfab.analyse.compare import compare
from perfab.analyse.history import history
from perfab.specfile import parse_spec


def _stored(store) -> None:
    """Eight runs: the newest attempt of run 2 replaces its first, run 5 failed, run 6 excluded ops."""
    session = start(store, runs=8)
    steps = plan(8)
    for i, p in enumerate(steps):
        status = "failed" if i == 5 else "ok"
        excluded = {"ops": "parser found none"} if i == 6 else {}
        store.record_run(session, p, record(status, ops=100.0 + i, excluded=excluded,
                                            metrics={"ops": 100.0 + i, "zeta": float(i)}))
    store.record_run(session, steps[2], record("ok", metrics={"ops": 250.0, "zeta": 2.0}))


def test_load_gives_columns_and_the_analysis_builds_no_run_objects(stores):
    with stores() as store:
        _stored(store)
        data = store.load("contract")
        spec = parse_spec(data.sessions[-1].spec_text, "contract.toml")
        t = data.table
        assert len(t) == 8 and t.run_id.dtype == np.int64 and t.warmup.dtype == bool
        assert list(data.samples) == ["ops", "zeta"]  # name order, whatever the insert order
        ops = data.samples["ops"]
        assert isinstance(ops.values, np.ndarray) and ops.values.dtype == np.float64
        assert 250.0 in ops.values.tolist() and 102.0 not in ops.values.tolist()  # only the newest attempt
        assert np.all(np.diff(ops.rows) > 0)
        assert [t.status[i] for i in range(len(t))].count("failed") == 1
        analysis = compare(data, spec)
        assert analysis.rows and history(store, "contract").series
        assert data.runs._runs is None and data.values._values is None  # the views were never built
        by_id = {r.run_id: r for r in data.runs}
        assert len(by_id) == 8 and sum(r.status == "failed" for r in by_id.values()) == 1
        assert sorted(data.values[rid]["zeta"] for rid in by_id if rid in data.values) == \
            sorted(data.samples["zeta"].values.tolist())
