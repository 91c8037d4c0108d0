"""Reports of a deterministic experiment, compared with golden files (stdout and stderr of ``perfab report``).

Rewrite the golden files after an intended change with
``PERFAB_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/core/test_core_report_golden.py``
and review the diff.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
from pathlib import Path

import pytest

from core_helpers import FIXED_ENV, FakeOutcome, cli, fake_runner

GOLDEN = Path(__file__).parent / "golden"

SPEC = """\
[experiment]
name = "lockbench-golden"
runs = 12
warmup = 1
seed = 1
margin = 0.5

{variants}
[[workload]]
name = "lockbench"
argv = ["./build/{{variant}}/lockbench", "3000000"]
parser = "keyvalue"

[[workload.metric]]
name = "ops/s"
label = "lock+unlock ops/s"
direction = "higher"
primary = true

[[workload.metric]]
name = "checksum"
label = "checksum (same work)"
method = "exact"
"""

TWO = '[[variant]]\nname = "outline"\n\n[[variant]]\nname = "inline"\n'
THREE = TWO + '\n[[variant]]\nname = "inline-O3"\n'


def _behaviour(speed: dict[str, float], seed: int = 42):
    """Seeded lockbench: ops/s around 1e6 * speed[side] with 0.5% noise, a fixed checksum, wall time to match."""
    rng = random.Random(seed)

    def behaviour(argv, env):
        side = argv[0].split("/")[2]
        ops = round(1_000_000 * speed[side] * (1 + rng.gauss(0, 0.005)))
        return FakeOutcome(wall_s=round(3_000_000 / ops, 6), user_s=round(2_990_000 / ops, 6),
                           stdout=f"ops/s: {ops}\nchecksum: 4242\n".encode())

    return behaviour


def _experiment(db, speed: dict[str, float], variants: str = TWO):
    runner, _, store = fake_runner(SPEC.format(variants=variants), db, _behaviour(speed), dict(FIXED_ENV),
                                   path="lockbench.toml")
    result = runner.run()
    store.close()
    assert result.status == "finished"


def _golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PERFAB_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"{path} missing: run with PERFAB_UPDATE_GOLDEN=1 to create it"
    assert actual == path.read_text(), f"{name} differs from its golden file"


@pytest.fixture
def improved(db):
    _experiment(db, {"outline": 1.0, "inline": 1.03})
    return db


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_report_matches_golden(improved, fmt):
    code, out, err = cli("report", "--db", str(improved), "--format", fmt)
    assert code == 0
    _golden(f"improved.{fmt}.stdout", out)
    _golden(f"improved.{fmt}.stderr", err)


def test_verbose_prints_every_note_the_compact_report_folds(improved):
    """--verbose prints the legend whole (directions of every row, the tests, the detectable effect); the compact
    report keeps the key and one line naming what it folded."""
    code, out, err = cli("report", "--db", str(improved), "--verbose")
    assert (code, err) == (0, "")
    _golden("improved.text-verbose.stdout", out)
    _, compact, _ = cli("report", "--db", str(improved))
    assert compact.splitlines()[-1] == "3 notes change no verdict: tests, Delta without %, MDE (see --verbose)"
    flat = " ".join(out.split())
    assert "Tests: checksum: exact counts" in flat and "Minimum detectable effect" in flat
    assert "Time elapsed/User/Sys/Max RSS/Ctx switches vol/Ctx switches invol: lower = better." in flat
    assert "Time elapsed/User: lower = better." in compact  # the rows that changed: Sys, Max RSS... did not
    assert out.split("-" * 62)[:2] == compact.split("-" * 62)[:2]  # the same SETUP and table


def test_text_report_fits_80_columns(improved):
    _, out, _ = cli("report", "--db", str(improved))
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "lock+unlock ops/s" in out and "checksum (same work)" in out


def test_json_carries_raw_samples(improved):
    code, out, _ = cli("report", "--db", str(improved), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["experiment"] == "lockbench-golden" and doc["runs_per_side"] == {"outline": 12,
                                                                                           "inline": 12}
    ops = next(r for r in doc["rows"] if r["metric"] == "ops/s")
    assert len(ops["base_values"]) == len(ops["exp_values"]) == 12
    assert all(v == int(v) and 950_000 < v < 1_050_000 for v in ops["base_values"])
    assert ops["median_base"] == pytest.approx(sorted(ops["base_values"])[5:7][0] / 2
                                               + sorted(ops["base_values"])[5:7][1] / 2)
    assert ops["verdict"] == "**" and ops["delta"] > 0 and not ops["regressed"]
    check = next(r for r in doc["rows"] if r["metric"] == "checksum")
    assert check["method"] == "exact" and check["verdict"] == "flat" and check["base_values"] == [4242.0] * 12


def test_csv_header_and_one_line_per_row(improved):
    _, out, _ = cli("report", "--db", str(improved), "--format", "csv")
    lines = out.splitlines()
    rows = list(csv.DictReader(io.StringIO(out)))
    _, js, _ = cli("report", "--db", str(improved), "--format", "json")
    assert lines[0].startswith("workload,metric,label,variant")
    assert len(lines) == 1 + len(rows) == 1 + len(json.loads(js)["rows"])
    assert rows[0]["metric"] == "ops/s" and rows[0]["verdict"] == "**"


def test_fail_on_regression(db, improved):
    code, _, err = cli("report", "--db", str(improved), "--fail-on-regression")
    assert code == 0 and err == ""
    slower = db.parent / "slower.db"
    _experiment(slower, {"outline": 1.0, "inline": 0.95})
    code, out, err = cli("report", "--db", str(slower), "--fail-on-regression")
    assert code == 1 and "**" in out
    (line,) = err.splitlines()
    assert line.startswith("perfab: regression beyond noise in primary metric(s): "
                           "lockbench/lock+unlock ops/s [inline] -")


def test_flat_change_is_not_a_regression(db):
    _experiment(db, {"outline": 1.0, "inline": 1.0})
    code, out, err = cli("report", "--db", str(db), "--fail-on-regression")
    assert code == 0 and err == ""


def test_three_variants_give_the_normalized_table(db):
    _experiment(db, {"outline": 1.0, "inline": 1.03, "inline-O3": 0.97}, THREE)
    code, out, err = cli("report", "--db", str(db))
    assert code == 0
    _golden("three.text.stdout", out)
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("Metric"))
    assert header.split()[1:] == ["outline", "inline", "inline-O3"]
    ops = next(line for line in lines if line.startswith("lock+unlock ops/s"))
    cells = ops.split()
    assert cells[2] == "100.00%"
    assert cells[3].startswith("10") and cells[4] == "**"  # inline ~103%
    assert cells[5].startswith("9") and cells[6] == "**"  # inline-O3 ~97%
    assert max(len(line) for line in lines) <= 80


def test_every_distinct_failure_reason_is_reported(tmp_path):
    """Regression: only the first failure reason per side was shown, hiding a timeout behind an exit 1."""
    from perfab.analyse.compare import analyse
    from perfab.report import render
    from perfab.run.backends import TimeBackend
    from perfab.run.executor import FakeExecutor, FakeOutcome
    from perfab.run.runner import Runner
    from perfab.specfile import parse_spec
    from perfab.store import Store

    b_runs = iter(range(1000))

    def behaviour(argv, env):
        if argv[-1] != "b":
            return FakeOutcome(wall_s=0.1)
        i = next(b_runs)
        if i in (1, 3):
            return FakeOutcome(exit_code=1, stderr=b"boom\n")
        if i == 4:
            return FakeOutcome(timed_out=True, signal=9)
        return FakeOutcome(wall_s=0.1)

    spec = parse_spec('[experiment]\nname = "f"\nruns = 6\nwarmup = 0\nmax_failures = 10\n'
                      '[[variant]]\nname = "a"\n[[variant]]\nname = "b"\n'
                      '[[workload]]\nname = "w"\nargv = ["run", "{variant}"]\n')
    with Store(tmp_path / "r.db") as store:
        Runner(spec, store, TimeBackend(), FakeExecutor(behaviour), {}).run()
        text = render(analyse(store, "f"), "text")
    failed = [line for line in text.splitlines() if line.startswith("Failed runs on b")]
    assert len(failed) == 1
    assert failed[0].startswith("Failed runs on b: 3 (2x exit status 1: boom; timed out after")


def test_the_robots_layout_matches_golden_and_its_figures(improved):
    """``--format lkp``: each side's mean ± its relative stddev and the %change of the means, as lkp-tests mails."""
    code, out, err = cli("report", "--db", str(improved), "--format", "lkp")
    assert code == 0, err
    _golden("improved.lkp.stdout", out)
    code, raw, _ = cli("report", "--db", str(improved), "--format", "json")
    row = next(r for r in json.loads(raw)["rows"] if r["metric"] == "ops/s")
    base, exp = row["base_values"], row["exp_values"]
    change = 100 * (sum(exp) / len(exp)) / (sum(base) / len(base)) - 100
    line = next(x for x in out.splitlines() if x.rstrip().endswith("lockbench.ops/s  [**]"))
    assert f"{change:+.1f}%" in line and f"{sum(base) / len(base):.0f}" in line, line
