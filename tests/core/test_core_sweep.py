"""Parameter sweeps: points interleaved in the plan, compared point by point, reported as sweep tables."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter

from core_helpers import FakeOutcome, cli, fake_runner

SPEC = """
[experiment]
name = "scale"
runs = {runs}
warmup = 0
margin = 2
{variants}
[[workload]]
name = "mmap"
argv = ["./mmap-bench", "--threads={{threads}}", "--size={{size}}"]
parser = "keyvalue"
params = {{threads = [1, 2, 4], size = ["4k", "2m"]}}

[[workload.metric]]
name = "ops/s"
direction = "higher"
"""
TWO = '[[variant]]\nname = "old"\n[[variant]]\nname = "new"\n'
ONE = '[[variant]]\nname = "old"\n'


def _behaviour(seed: int = 3):
    """ops/s falls with threads; `new` is 10% faster at 4 threads only."""
    rng = random.Random(seed)

    def behaviour(argv, env):
        threads = int(argv[1].split("=")[1])
        side = "new" if env.get("SIDE") == "new" else "old"
        base = 1_000_000 * threads ** 0.5
        boost = 1.10 if side == "new" and threads == 4 else 1.0
        ops = base * boost * (1 + rng.gauss(0, 0.004))
        return FakeOutcome(wall_s=0.05, stdout=f"ops/s: {ops:.0f}\n".encode())

    return behaviour


def _run(db, variants=TWO, runs=8):
    variants = variants.replace('name = "new"\n', 'name = "new"\nenv = {SIDE = "new"}\n')
    runner, ex, store = fake_runner(SPEC.format(runs=runs, variants=variants), db, _behaviour())
    assert runner.run().status == "finished"
    store.close()
    return ex


def test_the_plan_interleaves_points_and_sides_and_expands_each_point(db):
    ex = _run(db)
    points = [(c[0][1], c[0][2]) for c in ex.calls]
    assert Counter(points) == {(f"--threads={t}", f"--size={s}"): 16 for t in (1, 2, 4) for s in ("4k", "2m")}
    first_block = points[:24]
    assert len(set(first_block)) == 6  # every point runs in the first block: drift hits all alike


def test_each_point_is_compared_and_reported_as_a_sweep_table(db):
    _run(db)
    code, out, err = cli("report", "--db", str(db), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {(r["params"]["threads"], r["params"]["size"]): r for r in doc["rows"] if r["metric"] == "ops/s"}
    assert len(rows) == 6
    for (threads, _), row in rows.items():
        assert row["verdict"] == ("**" if threads == "4" else "flat"), row
        if threads == "4":
            assert 0.08 < row["delta"] < 0.12
    summaries = [s for s in doc["summaries"] if s["metric"] == "ops/s"]
    assert len(summaries) == 12  # two sides at six points
    one = next(s for s in summaries if s["params"] == {"threads": "4", "size": "4k"} and s["variant"] == "old")
    assert one["per_thread"] == one["median"] / 4 and one["lo"] <= one["median"] <= one["hi"]
    code, text, _ = cli("report", "--db", str(db))
    table = text.split("ops/s (higher = better)")[1].split("\n\n")[0].splitlines()
    points = [line.split()[0] for line in table if line.startswith("threads=")]
    assert points[:2] == ["threads=1", "threads=1"] and points[-1] == "threads=4"  # spec order
    assert "per thread (median / threads):" in text
    code, out, _ = cli("report", "--db", str(db), "--format", "csv")
    header = next(csv.reader(io.StringIO(out)))
    assert header[:4] == ["workload", "metric", "threads", "size"]


def test_a_single_side_sweep_is_a_scaling_curve_with_intervals(db):
    _run(db, variants=ONE)
    code, out, err = cli("report", "--db", str(db))
    assert code == 0, err
    assert "side     : old (one side: absolute values, no comparison)" in out
    curve = out.split("ops/s (higher = better)")[1].split("\n\n")[0]
    lines = [line for line in curve.split("per thread")[0].splitlines() if line.startswith("threads=")]
    assert len(lines) == 6 and all(" .. " in line and line.split()[-1] == "8" for line in lines)
    assert "**" not in out.split("SETUP")[1]
    code, out, _ = cli("report", "--db", str(db), "--format", "json")
    assert json.loads(out)["rows"] == [] and len(json.loads(out)["summaries"]) >= 6


def test_machine_interrupts_are_counted_per_run(tmp_path):
    spec = tmp_path / "irq.toml"
    spec.write_text('[experiment]\nname = "irq"\nruns = 2\nwarmup = 0\n[measure]\ninterrupts = ["TLB", "LOC"]\n'
                    '[[variant]]\nname = "a"\n[[variant]]\nname = "b"\n'
                    '[[workload]]\nname = "w"\nargv = ["sleep", "0.05"]\n')
    db = tmp_path / "r.db"
    code, out, err = cli("run", str(spec), "--db", str(db), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["metric"]: r for r in doc["rows"]}
    assert rows["interrupts.LOC"]["source"] == "machine" and rows["interrupts.LOC"]["higher_is_better"] is None
    assert all(v >= 1 for v in rows["interrupts.LOC"]["base_values"])  # the timer ticks during 50 ms
    assert rows["interrupts.TLB"]["higher_is_better"] is False
    assert doc["workloads"][0]["excluded"] == {}  # a row this machine lacks is refused before the runs
