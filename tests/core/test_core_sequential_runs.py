"""runs = "auto": the plan grows block by block and the session stops when its rows are decided."""

from __future__ import annotations

import os
import random
import signal

from core_helpers import FakeOutcome, cli, fake_runner, runs_table

SPEC = """
[experiment]
name = "seq"
runs = "auto"
min_runs = 6
max_runs = {max_runs}
warmup = 1
margin = {margin}

[[variant]]
name = "a"
[[variant]]
name = "b"
env = {{SIDE = "b"}}

[[workload]]
name = "w"
argv = ["w"]
parser = "keyvalue"

[[workload.metric]]
name = "ops/s"
direction = "higher"
primary = true
"""


def _behaviour(shift: float, noise: float, seed: int = 5, hook=None):
    rng = random.Random(seed)
    calls = [0]

    def behaviour(argv, env):
        calls[0] += 1
        if hook:
            hook(calls[0])
        factor = 1 + shift if env.get("SIDE") == "b" else 1.0
        ops = 1_000_000 * factor * (1 + rng.gauss(0, noise))
        return FakeOutcome(wall_s=0.01, stdout=f"ops/s: {ops:.0f}\n".encode())

    return behaviour


def _planned(db) -> int:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM planned_runs WHERE warmup = 0").fetchone()[0]
    finally:
        con.close()


def test_a_clear_change_stops_at_the_first_look_that_can_check_serial_correlation_and_says_why(db):
    """Before 12 runs per side a look assumes lag-1 correlation 0.6 (``analyse.serial``): a +5% change at 0.5%
    noise, `**` at the first look of 6 runs per side when runs were taken as independent, is decided at 12."""
    runner, ex, store = fake_runner(SPEC.format(max_runs=40, margin=0.5), db, _behaviour(0.05, 0.005))
    result = runner.run()
    store.close()
    assert result.status == "finished"
    assert _planned(db) == 24  # 12 per side: the plan grew to the first look that estimates the correlation
    code, out, err = cli("report", "--db", str(db))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("ops/s"))
    assert row.split()[-1] == "**"
    text = " ".join(out.split())
    assert "stopping : runs = \"auto\", 6..40 per side; stopped after 12 runs per side: every primary row decided" \
        in text
    assert "group-sequential rank test" not in text  # the tests are folded (they change no verdict) ...
    verbose = " ".join(cli("report", "--db", str(db), "--verbose")[1].split())
    assert "group-sequential rank test" in verbose  # ... and named with --verbose


def test_an_a_a_experiment_stops_flat_early(db):
    runner, ex, store = fake_runner(SPEC.format(max_runs=40, margin=2), db, _behaviour(0.0, 0.002))
    runner.run()
    store.close()
    code, out, _ = cli("report", "--db", str(db), "--format", "json")
    import json

    doc = json.loads(out)
    row = next(r for r in doc["rows"] if r["metric"] == "ops/s")
    assert row["verdict"] == "flat" and row["method"] == "sequential"
    assert row["n_base"] < 40  # decided before max_runs


def test_an_undecided_row_runs_to_max_runs_and_ends_ns_with_the_reason(db):
    runner, ex, store = fake_runner(SPEC.format(max_runs=12, margin=0.1), db, _behaviour(0.003, 0.05))
    result = runner.run()
    store.close()
    assert result.status == "finished"
    assert _planned(db) == 24  # grew one block at a time up to max_runs per side
    code, out, _ = cli("report", "--db", str(db))
    row = next(line for line in out.splitlines() if line.startswith("ops/s"))
    assert row.split()[-1] == "ns"
    assert "12 runs per side" in " ".join(out.split())


def test_resume_continues_a_sequential_experiment_to_its_decision(db):
    def interrupt(n):
        if n == 9:
            os.kill(os.getpid(), signal.SIGINT)

    text = SPEC.format(max_runs=12, margin=0.1)
    runner, ex, store = fake_runner(text, db, _behaviour(0.003, 0.05, hook=interrupt))
    assert runner.run().status == "interrupted"
    stored = len(runs_table(db))
    store.close()
    runner, ex, store = fake_runner(text, db, _behaviour(0.003, 0.05, seed=6))
    result = runner.run(resume=True)
    store.close()
    assert result.status == "finished" and len(runs_table(db)) > stored
    assert _planned(db) == 24


def test_sequential_keys_without_auto_and_orders_without_blocks_are_refused(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(max_runs=12, margin=1).replace('runs = "auto"', "runs = 10"))
    code, _, err = cli("plan", str(spec))
    assert code == 2 and 'experiment.min_runs: is read only with runs = "auto"' in err
    spec.write_text(SPEC.format(max_runs=12, margin=1).replace("warmup = 1", 'warmup = 1\norder = "random"'))
    code, _, err = cli("plan", str(spec))
    assert code == 2 and "experiment.order" in err and "looks after each block" in err
    spec.write_text(SPEC.format(max_runs=4, margin=1))
    code, _, err = cli("plan", str(spec))
    assert code == 2 and "experiment.max_runs: 4 is below min_runs 6" in err
