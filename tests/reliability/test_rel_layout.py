"""Two sides that differ only in the length of a path start their stacks at the same address.

One C program, copied to a short and to a long path; each side runs its
copy with address-space randomisation off (``setarch -R``) and prints
where a stack variable lies.  Without padding the two sides' stacks start
at different offsets (the longer path pushes everything down), so any
measurement of them could differ by layout alone; with perfab's padding
(``PERFAB_LAYOUT_PAD``) the addresses are equal, and the session records
the layout it used.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from reliability_helpers import cli, write

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("setarch") is None,
                                reason="needs cc and setarch")

PROGRAM = ('#include <stdio.h>\n#include <stdlib.h>\nint main(void) { volatile int x = 0; '
           'printf("sp: %lu\\n", (unsigned long)&x % 65536); return x; }\n')


def sides(tmp_path: Path, env_b: str = "") -> Path:
    write(tmp_path / "sp.c", PROGRAM)
    short, long = tmp_path / "b" / "sp", tmp_path / "build" / "a-much-longer-directory-name" / "sp"
    for target in (short, long):
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-O1", "-o", str(target), str(tmp_path / "sp.c")], check=True)
    return write(tmp_path / "s.toml", f"""[experiment]
name = "layout"
runs = 3
warmup = 0

[[variant]]
name = "short"
vars = {{prog = "{short}"}}
wrap = ["setarch", "-R"]

[[variant]]
name = "long"
vars = {{prog = "{long}"}}
wrap = ["setarch", "-R"]
{env_b}

[[workload]]
name = "w"
argv = ["{{prog}}"]
parser = "keyvalue"
""")


def stack_offsets(db: Path) -> dict[str, set[float]]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT p.variant, s.value FROM samples s JOIN runs r ON r.id = s.run_id "
                       "JOIN planned_runs p ON p.id = r.planned_id WHERE s.metric = 'sp'").fetchall()
    con.close()
    out: dict[str, set[float]] = {}
    for side, value in rows:
        out.setdefault(side, set()).add(value)
    return out


@pytest.mark.parametrize("env_b", ["", 'env = {EXTRA = "a-value-only-one-side-has-0123456789"}'],
                         ids=["path-lengths", "path-lengths-and-an-env-var"])
def test_sides_differing_in_path_length_start_their_stacks_alike(tmp_path, env_b):
    spec = sides(tmp_path, env_b)
    out = cli("run", spec, "--db", tmp_path / "r.db", "--no-report")
    assert out.code == 0, out.err
    offsets = stack_offsets(tmp_path / "r.db")
    assert len(offsets["short"]) == 1 and offsets["short"] == offsets["long"], offsets


def test_without_padding_the_stacks_differ(tmp_path):
    """The control: the same two programs run by hand, without the pad, start at different offsets."""
    sides(tmp_path)
    run = lambda p: subprocess.run(["setarch", "-R", str(p)], capture_output=True, text=True,  # noqa: E731
                                   env={"PATH": "/usr/bin:/bin"}).stdout
    assert run(tmp_path / "b" / "sp") != run(tmp_path / "build" / "a-much-longer-directory-name" / "sp")


def test_the_session_records_the_layout(tmp_path):
    spec = sides(tmp_path)
    assert cli("run", spec, "--db", tmp_path / "r.db", "--no-report").code == 0
    con = sqlite3.connect(tmp_path / "r.db")
    env = json.loads(con.execute("SELECT environment_json FROM sessions").fetchone()[0])
    con.close()
    assert env["layout"].startswith("argv, environment and program path padded to equal bytes on every side")


def test_a_side_this_session_cannot_expand_is_left_out(tmp_path):
    """An external side's {build} is unknown to the other side's session: padding uses the sides it can see."""
    from perfab.errors import SpecError
    from perfab.run.layout import PAD_VAR, Padding
    from perfab.specfile import parse_spec

    exp = parse_spec(two_sides_external(), str(tmp_path / "s.toml"))
    here, other = exp.variants

    def values_of(v):
        if v is other:
            raise SpecError("unknown placeholder {build}")
        return {"build": "/b"}

    env = Padding(exp.variants).env(here, exp.workloads[0], (), None, values_of, lambda v: {"PATH": "/usr/bin"})
    assert set(env) == {"PATH", PAD_VAR} and len(env[PAD_VAR]) == 64


def two_sides_external() -> str:
    return ('[experiment]\nname = "x"\nruns = 2\n\n[[variant]]\nname = "a"\nexternal = true\n\n'
            '[[variant]]\nname = "b"\nexternal = true\n\n[[workload]]\nname = "w"\nargv = ["{build}/prog"]\n')


@pytest.mark.parametrize("fill", [1, 5, 9, 13])
def test_one_more_variable_on_one_side_is_padded_whatever_perfabs_own_environment(tmp_path, monkeypatch, fill):
    """Regression: equal string bytes alone left a side with one more variable a pointer slot (and, after the
    kernel's 16-byte rounding, a whole 16 bytes) off, for some lengths of the environment perfab ran in."""
    monkeypatch.setenv("PERFAB_TEST_FILL", "x" * fill)
    spec = sides(tmp_path, 'env = {EXTRA = "a-value-only-one-side-has-0123456789"}')
    out = cli("run", spec, "--db", tmp_path / "r.db", "--no-report")
    assert out.code == 0, out.err
    offsets = stack_offsets(tmp_path / "r.db")
    assert len(offsets["short"]) == 1 and offsets["short"] == offsets["long"], offsets
