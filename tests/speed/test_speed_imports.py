"""Start-up: commands that analyse nothing import no numerical library.

numpy, scipy and pandas cost about half a second to import; the command
line imports them where an analysis or an explained size diff uses them.
``--help`` of every command, ``list``, ``plan``, ``env``, ``counters``,
``run --no-report`` and ``size --compat`` (the compiled symbol reader) import
none of them.  Each
case runs in a fresh interpreter (``sys.modules`` of this test process
already holds everything) and prints the heavy modules it ended up with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

SRC = Path(__file__).resolve().parents[2] / "src"
HEAVY = ("numpy", "scipy", "pandas")

PROBE = """
import io, json, sys
from perfab import cli
for argv in json.loads(sys.argv[1]):
    try:
        cli.main(argv, io.StringIO(), io.StringIO())
    except SystemExit:  # argparse's --help exits
        pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[2])))))
"""


def _heavy_after(argvs: list[list[str]]) -> list[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs), json.dumps(HEAVY)], env=env,
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


HELP = [["--help"], ["size", "--help"], *([c, "--help"] for c in
        ("run", "report", "plan", "bisect", "list", "history", "env", "counters", "screen", "submit", "worker"))]


def test_import_of_the_cli_loads_no_numerical_library():
    assert _heavy_after([]) == []


@pytest.mark.parametrize("argv", HELP, ids=lambda a: " ".join(a))
def test_help_loads_no_numerical_library(argv):
    assert _heavy_after([argv]) == []


def test_list_of_a_real_store_loads_no_numerical_library(tmp_path):
    db = tmp_path / "results.db"
    assert _heavy_after([["list", "--db", str(db)]]) == []


LISTED = """
import io, sys
before = set(sys.modules)
from perfab import cli
out = io.StringIO()
assert cli.main(["list", "--db", sys.argv[1]], out, io.StringIO()) == 0, out.getvalue()
print(out.getvalue().split()[0], *sorted(m for m in set(sys.modules) - before
                                          if m.startswith("perfab") or m in ("dataclasses", "pathlib", "typing")))
"""


def test_list_loads_the_sql_counts_alone(tmp_path):
    """`perfab list` was 6.8x Python's own start-up: it loaded the store's typed values, the plan and the spec
    layer (dataclasses, typing, pathlib) to run two counts in SQL (bench/startup.py times it).  The command
    objects are all loaded (``perfab --help`` lists them); what each drives is imported when it runs."""
    from perfab.run.backends import TimeBackend
    from perfab.run.executor import FakeExecutor
    from perfab.run.runner import Runner
    from perfab.specfile import parse_spec
    from perfab.store import Store

    db = tmp_path / "results.db"
    with Store(db) as store:
        Runner(parse_spec('[experiment]\nname = "listed"\nruns = 2\nwarmup = 0\n[[variant]]\nname = "a"\n'
                          '[[variant]]\nname = "b"\n[[workload]]\nname = "w"\nargv = ["sleep", "0.01"]\n'),
               store, TimeBackend(), FakeExecutor(), {}).run()
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run([sys.executable, "-c", LISTED, str(db)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    name, *loaded = out.stdout.split()
    assert name == "listed"
    library = {m for m in loaded if m != "perfab.commands" and not m.startswith("perfab.commands.")}  # the commands
    assert library <= {"perfab", "perfab.cli", "perfab.errors", "perfab.terminal", "perfab.store",
                       "perfab.store.listing", "perfab.store.schema", "perfab.store.sqlitefile"}, loaded


def test_plan_env_and_counters_load_no_numerical_library(tmp_path):
    spec = tmp_path / "true.toml"
    spec.write_text('[experiment]\nname = "t"\nruns = 3\n\n[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n'
                    '[[workload]]\nname = "true"\nargv = ["/bin/true"]\n')
    assert _heavy_after([["plan", str(spec)], ["env"], ["counters"]]) == []


def test_run_without_a_report_loads_no_numerical_library(tmp_path):
    """`perfab run --no-report` stores real runs and analyses nothing; with a report it does load numpy."""
    spec = tmp_path / "true.toml"
    spec.write_text('[experiment]\nname = "t"\nruns = 3\nwarmup = 0\n\n[[variant]]\nname = "a"\n\n'
                    '[[variant]]\nname = "b"\n\n[[workload]]\nname = "true"\nargv = ["/bin/true"]\n')
    db = str(tmp_path / "results.db")
    assert _heavy_after([["run", str(spec), "--db", db, "--no-report"]]) == []
    assert "numpy" in _heavy_after([["run", str(spec), "--db", db, "--new-session"]])


def test_size_compat_loads_no_numerical_library(tmp_path):
    """bloat-o-meter's table comes from the compiled reader (perfab.size.quick), without numpy."""
    native = pytest.importorskip("perfab_native")
    if not hasattr(native, "nm_diff"):
        pytest.skip("the installed perfab_native predates nm_diff; rebuild it with `make native`")
    src = TESTS / "size" / "src" / "prog.c"
    for variant in ("OLD", "NEW"):
        subprocess.run(["gcc", "-O2", f"-D{variant}", "-c", str(src), "-o", str(tmp_path / f"{variant}.o")], check=True)
    argv = ["size", "--compat", str(tmp_path / "OLD.o"), str(tmp_path / "NEW.o")]
    assert _heavy_after([argv, ["size", "--compat", "-c", *argv[2:]]]) == []


def test_the_probe_sees_a_numerical_library_when_one_is_loaded():
    """The probe itself can fail: a report's analysis does import numpy."""
    assert "numpy" in _heavy_after([["report", "--help"], ["size", "/nonexistent-old", "/nonexistent-new"]])


def test_every_help_text_renders(capsys):
    """`perfab report --help` raised a TypeError on a bare % in a help string."""
    from perfab.cli import main

    for argv in HELP:
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse exits after printing help
            code = stop.code
        assert code == 0, argv
        assert "usage: perfab" in capsys.readouterr().out
