"""Rusage figures are the workload's own under every backend and wrapper, or left out with a note."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from core_helpers import cli

WRAPPER = ("import subprocess, sys; hog = bytearray(120 * 1024 * 1024); hog[::4096] = b'x' * len(hog[::4096]); "
           "sys.exit(subprocess.run(sys.argv[1:]).returncode)")


def _spec(tmp_path, backend: str = "") -> str:
    spec = tmp_path / "s.toml"
    spec.write_text(f"""
[experiment]
name = "rss"
runs = 2
warmup = 0
{backend}
[[variant]]
name = "plain"
[[variant]]
name = "wrapped"
wrap = ["{sys.executable}", "-c", "{WRAPPER}"]
[[workload]]
name = "w"
argv = ["/bin/sleep", "0.01"]
""")
    return str(spec)


def _rows(tmp_path, out):
    return {r["metric"]: r for r in json.loads(out)["rows"]}


def test_a_forking_wrapper_does_not_lend_its_peak_rss_to_the_workload(tmp_path):
    """Under a wrapper that forks (and holds 120 MB) wait4 reports the wrapper's peak; perfab reads the workload's."""
    code, out, err = cli("run", _spec(tmp_path), "--db", str(tmp_path / "r.db"), "--format", "json")
    assert code == 0, err
    rss = _rows(tmp_path, out)["max_rss_kb"]
    assert max(rss["base_values"] + rss["exp_values"]) < 20_000, rss  # sleep's own few MB on both sides
    assert rss["verdict"] != "**" or abs(rss["delta"]) < 0.5


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is installed by make test")
def test_under_perf_max_rss_is_left_out_with_a_note_and_times_are_perfs_view_of_the_workload(tmp_path):
    """Max RSS under the perf backend was perf's own (1.5 MB -> 13.4 MB)."""
    spec = _spec(tmp_path, '[measure]\nbackend = "perf"\ncounters = ["task-clock"]')
    code, out, err = cli("run", spec, "--db", str(tmp_path / "r.db"), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["metric"]: r for r in doc["rows"]}
    assert "max_rss_kb" not in rows and "vcsw" not in rows
    assert any("max RSS and context switches are left out under perf" in n for n in doc["notes"])
    assert "user_s" in rows and all(v < 0.05 for v in rows["user_s"]["base_values"])


@pytest.mark.parametrize("max_rss_kb", [2048, None])
def test_an_executions_rusage_is_read_field_for_field(max_rss_kb):
    """``rusage_of`` spells the fields out for speed: it must read what ``RUSAGE_FIELDS`` names, and leave
    max RSS out only where it is unknown."""
    from functools import partial

    from perfab.run.execution import Execution
    from perfab.run.readings import rusage_of, rusage_readings

    ex = Execution(0, 0.25, 0.125, 0.0625, max_rss_kb, 3, 5, False, b"", b"", 0, 0)
    named = rusage_readings(partial(getattr, ex))
    assert rusage_of(ex) == {m: v for m, v in named.items() if v is not None}
    assert ("max_rss_kb" in rusage_of(ex)) == (max_rss_kb is not None) and len(named) == 6
