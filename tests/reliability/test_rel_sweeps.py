"""Sweeps given values or names that would give wrong rows: refused when the spec is read, through plan and run.

A ``%`` value must be a well-formed share of the online CPUs (``"N%"``,
``0 < N <= 10000``); anything else with a ``%`` in it used to reach the
workload as a literal string.  A side's ``vars`` named like a sweep
parameter replaced every sweep value (rows labelled ``threads=1/2`` all ran
with the side's value).  ``runs`` in the wrong case, and a build command
using a sweep placeholder, are one line each saying what to write.  Every
refusal: exit 2, ``perfab: FILE: KEY: ...``, the stored session unchanged.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from reliability_helpers import cli, file_digest, stored_db, stored_rows, two_sides, write

PERCENT_FIX = 'write "N%" with 0 < N <= 10,000 (e.g. "50%"), a number, or text without %'
BAD_PERCENT = ["-50%", "nan%", "inf%", "1e3%", "100%%", "%", "%50", "0%", "0.0%", "10001%", "99999%", "50 %",
               "5O%", "50%x", "x50%", "1,5%", "0x10%", "+50%", "50.%", ".5%", "50%\t%", "١٠%"]


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    return stored_db(tmp_path_factory.mktemp("kept"))


def refused(tmp_path: Path, kept: Path, text: str, message: str) -> None:
    """``plan`` and ``run`` both exit 2 with exactly ``perfab: s.toml: MESSAGE``; the database is untouched."""
    write(tmp_path / "s.toml", text)
    db = shutil.copy(kept, tmp_path / "results.db")
    rows = stored_rows(db)
    before = file_digest(db)
    for argv in (("plan", "s.toml"), ("run", "s.toml", "--db", "results.db")):
        got = cli(*argv, cwd=tmp_path)
        got.one_line_error(2, "^" + re.escape(f"perfab: s.toml: {message}") + "$")
        assert got.out == ""
    assert file_digest(db) == before and stored_rows(db) == rows


def sweep(values: list) -> str:
    return two_sides(workload=f'argv = ["echo", "{{threads}}"]\nparams = {{threads = {json.dumps(values)}}}')


@pytest.mark.parametrize("value", BAD_PERCENT)
def test_a_percent_value_that_is_not_a_share_of_the_cpus(tmp_path, kept, value):
    """`"-50%"`, `"nan%"`, `"1e3%"`, `"100%%"` and kin: refused naming the key and the value."""
    refused(tmp_path, kept, sweep([1, value]),
            f"workload[0].params.threads: value {value!r} is not a share of the online CPUs; {PERCENT_FIX}")


@pytest.mark.parametrize("value, want", [("0.4%", "1"), ("100%", None), ("200%", None), ("10000%", None),
                                         ("4k", "4k"), ("1e3", "1e3"), ("-5", "-5"), (" 50%", None)])
def test_good_values_are_resolved_or_kept(tmp_path, value, want):
    """A well-formed share is resolved to a CPU count; a value without % is passed as written."""
    import os

    cpus = os.sysconf("SC_NPROCESSORS_ONLN")
    write(tmp_path / "s.toml", sweep([value, "zz"]))
    got = cli("plan", "s.toml", cwd=tmp_path)
    assert got.code == 0, got.err
    if want is None:
        share = float(value.strip().rstrip("%"))
        want = str(max(1, round(share / 100 * cpus)))
    assert f"threads={want}" in got.out


@pytest.mark.parametrize("where", ["first", "second", "both"])
def test_a_side_var_named_like_a_sweep_parameter(tmp_path, kept, where):
    """`vars = {threads = "99"}` on a side of a `threads` sweep: refused, naming the side and the fix."""
    var = 'vars = {threads = "99"}\n'
    first = var if where in ("first", "both") else ""
    second = var if where in ("second", "both") else ""
    text = two_sides(workload='argv = ["echo", "{threads}"]\nparams = {threads = [1, 2]}',
                     variants=f'[[variant]]\nname = "a"\n{first}\n[[variant]]\nname = "b"\n{second}')
    side = "a" if where != "second" else "b"
    refused(tmp_path, kept, text, f"workload[0].params.threads: variant {side!r} also sets vars.threads, which would "
                                  "replace every sweep value of {threads}; rename the variable or the sweep parameter")


def test_a_side_var_named_like_another_workloads_parameter(tmp_path, kept):
    """The second workload's sweep collides: the key named is that workload's."""
    text = two_sides(workload='argv = ["true"]',
                     variants='[[variant]]\nname = "a"\nvars = {size = "9"}\n\n[[variant]]\nname = "b"\n',
                     extra='\n[[workload]]\nname = "v"\nargv = ["echo", "{size}"]\nparams = {size = [1, 2]}\n')
    refused(tmp_path, kept, text, "workload[1].params.size: variant 'a' also sets vars.size, which would replace "
                                  "every sweep value of {size}; rename the variable or the sweep parameter")


def test_a_side_var_with_another_name_is_kept(tmp_path):
    """The refusal is narrow: a var that names no sweep parameter still fills its placeholder."""
    text = two_sides(workload='argv = ["echo", "{threads}", "{mode}"]\nparams = {threads = [1, 2]}',
                     variants='[[variant]]\nname = "a"\nvars = {mode = "fast"}\n\n[[variant]]\nname = "b"\n'
                              'vars = {mode = "slow"}\n')
    write(tmp_path / "s.toml", text)
    got = cli("plan", "s.toml", cwd=tmp_path)
    assert got.code == 0 and "threads=2" in got.out, got.err


@pytest.mark.parametrize("runs", ['"AUTO"', '"auto "', '"Auto"', '"20"', '""', '"sequential"'])
def test_runs_as_a_string_that_is_not_auto(tmp_path, kept, runs):
    """`runs = "AUTO"` says runs is an integer or "auto", not "expected integer"."""
    text = two_sides().replace("runs = 2", f"runs = {runs}")
    refused(tmp_path, kept, text, f'experiment.runs: expected integer or "auto", got string {json.loads(runs)!r}; '
                                  'write runs = 20 (runs per side) or runs = "auto" (lower case, a sequential '
                                  'experiment)')


@pytest.mark.parametrize("build", ['"make -j{threads}"', '"make", "THREADS={threads}"'])
def test_a_build_using_a_sweep_parameter(tmp_path, kept, build):
    """A build runs once per side: a sweep placeholder in it is named as such, not as an unknown name."""
    text = two_sides(workload='argv = ["echo", "{threads}"]\nparams = {threads = [1, 2]}',
                     variants=f'[[variant]]\nname = "a"\nbuild = [{build}]\n\n[[variant]]\nname = "b"\n')
    refused(tmp_path, kept, text, "variant 'a' build: {threads} is a sweep parameter of workload 'w', but a side "
                                  "is built once, for all sweep points; use it in the workload's argv, or a "
                                  "variant's vars, instead")
