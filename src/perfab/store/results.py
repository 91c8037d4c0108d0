"""An experiment's runs and samples as plain rows, for notebooks (``perfab.load``)."""

from __future__ import annotations

from dataclasses import dataclass

from perfab.errors import UsageError
from perfab.store import open_store


@dataclass(frozen=True)
class Results:
    """The runs and samples of one experiment, for notebooks (``perfab.load``)."""

    experiment: str  # experiment name
    runs: list[dict]  # one dict per counted run (see Store.run_rows)
    samples: list[dict]  # one dict per (run, metric, value), with workload, variant and sweep parameters

    def to_pandas(self):
        """Samples joined with their runs as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas as pd
        except ImportError:
            raise UsageError("to_pandas() needs pandas; pip install pandas") from None
        return pd.DataFrame(self.samples)


def open_results(db: str, experiment: str | None = None) -> Results:
    """Load an experiment's runs and samples from ``db`` (the newest experiment by default), read-only."""
    with open_store(db, readonly=True) as store:
        name = experiment or store.latest_experiment()
        data = store.load(name)
        runs = store.run_rows(name)
        by_id = {r.run_id: r for r in data.runs}
        samples = [{"run_id": rid, "workload": by_id[rid].workload, "variant": by_id[rid].variant,
                    **dict(by_id[rid].params), "seq": by_id[rid].seq, "warmup": by_id[rid].warmup,
                    "metric": m, "value": v}
                   for rid, values in sorted(data.values.items()) for m, v in values.items()]
        return Results(name, runs, samples)
