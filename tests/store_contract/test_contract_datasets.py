"""The same runs stored in SQLite and in PostgreSQL read back as the same dataset, report and outputs."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract_helpers import ENV, empty_schema, plan, record, start
from perfab.analyse.compare import compare
from perfab.metrics import resolve
from perfab.report import render
from perfab.run.backends import TimeBackend
from perfab.run.executor import FakeExecutor, FakeOutcome
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import open_store

SPEC = """[experiment]
name = "pair"
runs = 6
warmup = 1
seed = 3

[[variant]]
name = "a"

[[variant]]
name = "b"
env = { SIDE = "b" }

[[workload]]
name = "w"
argv = ["work"]
parser = "keyvalue"

[[workload.metric]]
name = "ops"
direction = "higher"
"""


def _behaviour(argv, env):
    """Side b does 10% more work per second; a dozen fixed per-run wobbles, no clock."""
    _behaviour.n += 1
    ops = (1100 if env.get("SIDE") == "b" else 1000) + (_behaviour.n * 7919) % 13
    return FakeOutcome(wall_s=0.01 * (1 + _behaviour.n % 3), stdout=f"ops: {ops}\nzeta: 1\nalpha: 2\n".encode())


def _without_clocks(data):
    """The dataset with the wall-clock start times (of the session and each run) set aside."""
    sessions = tuple(dataclasses.replace(s, started_at=0.0, owner=None) for s in data.sessions)
    runs = tuple(dataclasses.replace(r, started_at=0.0) for r in data.runs)
    return dataclasses.replace(data, sessions=sessions, runs=runs)


def _run_into(db: str):
    exp = parse_spec(SPEC, "pair.toml")
    _behaviour.n = 0
    with open_store(db, machine="lab-1") as store:
        Runner(exp, store, TimeBackend(), FakeExecutor(_behaviour), dict(ENV)).run()
        if hasattr(store.db, "execute_raw"):  # an order must not hang on the plan PostgreSQL happens to pick
            for scan in ("indexscan", "bitmapscan", "indexonlyscan"):
                store.db.execute_raw(f"SET enable_{scan} = off")
        data = store.load("pair")
        outputs = [store.output(r.run_id) for r in data.runs]
    return exp, data, outputs


def test_the_same_runs_give_the_same_dataset_and_report(tmp_path, pg_url):
    exp, lite, lite_out = _run_into(str(tmp_path / "r.db"))
    empty_schema(pg_url)
    _, post, post_out = _run_into(pg_url)
    assert len(lite.runs) == 14 and lite.values
    assert _without_clocks(lite) == _without_clocks(post)
    # the report meets metrics in the order the store hands them over: that order is part of the contract
    assert [list(v) for _, v in sorted(lite.values.items())] == [list(v) for _, v in sorted(post.values.items())]
    assert lite_out == post_out and lite_out[0][0].startswith(b"ops: ")
    assert render(compare(lite, exp), "text") == render(compare(post, exp), "text")
    assert [s.host for s in post.sessions] == ["lab-1"]


_names = st.text(alphabet="abcdefghij._/:%?' ", min_size=1, max_size=12)
_values = st.floats(allow_nan=False, allow_infinity=False, width=64)
_records = st.lists(st.tuples(
    st.sampled_from(["ok", "failed", "interrupted"]),
    st.dictionaries(_names, _values, max_size=5),
    st.dictionaries(_names, st.text(max_size=20).filter(lambda t: "\x00" not in t), max_size=2),
    st.binary(max_size=300),
    st.dictionaries(_names, st.floats(0, 100), max_size=3),
), min_size=1, max_size=6)


@settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_records)
def test_any_runs_read_back_identically(tmp_path_factory, pg_url, rows):
    """Names with quotes, '%' and '?', any finite double, any bytes: both stores hand back what they were given."""
    url = pg_url
    empty_schema(url)
    got = []
    for db in (str(tmp_path_factory.mktemp("p") / "r.db"), url):
        with open_store(db, machine="m") as store:
            session = start(store, "prop", runs=len(rows))
            for p, (status, metrics, excluded, out, shares) in zip(plan(len(rows)), rows):
                store.record_run(session, p, record(status, metrics=metrics, excluded=excluded, stdout=out,
                                                    profile=shares, sources={m: "parser" for m in metrics},
                                                    meta={m: resolve(m, unit="u", higher_is_better=None, exact=True,
                                                                     origin="parser") for m in metrics}))
            data = store.load("prop")
            got.append((_without_clocks(data), [list(v) for _, v in sorted(data.values.items())],
                        [store.output(r.run_id) for r in data.runs], store.run_rows("prop", all_attempts=True)))
    assert got[0][:3] == got[1][:3]
    for a, b in zip(got[0][3], got[1][3]):
        assert a.keys() == b.keys()
        assert all(a[k] == b[k] or (isinstance(a[k], float) and math.isclose(a[k], b[k])) for k in a)

