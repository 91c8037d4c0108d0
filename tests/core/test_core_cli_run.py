"""``perfab run`` end to end on the bundled lockbench, built here with gcc (a small site count)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from core_helpers import REPO, cli, runs_table

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build lockbench")


@pytest.fixture(scope="module")
def lockbench(tmp_path_factory):
    """build/{inline,outline}/lockbench with 16 sites, under a fresh directory."""
    root = tmp_path_factory.mktemp("lockbench")
    source = root / "lockbench.c"
    source.write_text(subprocess.run([sys.executable, str(REPO / "workloads" / "gen_lockbench.py"), "16"],
                                     capture_output=True, text=True, check=True).stdout)
    for side, flags in (("inline", []), ("outline", ["-DUNLOCK_OUTLINE"])):
        (root / "build" / side).mkdir(parents=True)
        subprocess.run(["gcc", "-O2", *flags, "-o", str(root / "build" / side / "lockbench"), str(source)],
                       check=True)
    return root


def _spec(root, runs: int = 4) -> str:
    text = (REPO / "examples" / "default.toml").read_text()
    text = text.replace("runs = 20", f"runs = {runs}").replace("warmup = 2", "warmup = 1")
    spec = root / f"default-{runs}.toml"
    spec.write_text(text.replace('"3000000"', '"200000"'))
    return str(spec)


def test_default_example_runs_end_to_end(lockbench, monkeypatch):
    monkeypatch.chdir(lockbench)
    db = lockbench / "e2e.db"
    code, out, err = cli("run", _spec(lockbench), "--db", str(db))
    assert code == 0, err
    assert err == ""
    rows = runs_table(db)
    assert len(rows) == 2 * (4 + 1) and {r[3] for r in rows} == {"ok"}
    assert "UNLOCK-INLINE" not in out and "LOCKBENCH" in out
    check = next(line for line in out.splitlines() if line.startswith("checksum (same work)"))
    assert check.split()[-1] == "flat"  # both builds do the same work
    code, listing, _ = cli("list", "--db", str(db))
    assert code == 0 and listing.startswith("unlock-inline") and "10 run(s), last finished" in listing
    code, js, _ = cli("report", "--db", str(db), "--format", "json")
    ops = next(r for r in json.loads(js)["rows"] if r["metric"] == "ops/s")
    assert ops["n_base"] == ops["n_exp"] == 4 and ops["primary"] and ops["higher_is_better"]
    assert all(v > 1e6 for v in ops["base_values"] + ops["exp_values"])


def test_missing_binary_is_refused_before_a_session_is_stored(lockbench, monkeypatch, tmp_path):
    """A typo in the program once left an aborted session after 5 failed runs; now nothing is stored."""
    monkeypatch.chdir(tmp_path)  # no build/ here
    db = tmp_path / "missing.db"
    code, out, err = cli("run", _spec(lockbench, runs=8), "--db", str(db))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert "argv[0] './build/" in err and "does not exist" in err and "Traceback" not in err
    code, _, err = cli("list", "--db", str(db))
    assert code == 0  # the database holds no session to resume or to block the next run


def test_off_a_terminal_a_long_session_says_where_it_stands_once_a_minute():
    """No bar without a terminal; a line once a minute instead, with the elapsed time and an estimate."""
    import io

    from perfab.commands.progress import Progress

    clock = iter([0.0, 0.0, 30.0, 61.0, 90.0, 125.0])  # construction, then one reading per call
    err = io.StringIO()
    progress = Progress(err)
    progress.clock = lambda: next(clock)
    progress.started = progress.last = progress.stretch = progress.clock()
    for done in range(5):
        progress(done, 10, "locksys inlined")
    lines = err.getvalue().splitlines()
    assert lines == ["perfab: run 2 of 10 (locksys inlined), 61s elapsed, about 4m left",
                     "perfab: run 4 of 10 (locksys inlined), 2m elapsed, about 3m left"], lines
