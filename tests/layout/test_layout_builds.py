"""Layout builds on real user-space sides: an A/A whose two builds differ only in where their code starts.

``hot.c`` calls a small function of its own and libc's ``strlen`` in a loop.  Under a 1 KiB direct-mapped
I1 (16 sets), whether the two collide in a set depends on the program's code offset alone: built with
its code 400 bytes later, the same source misses 34 times as often.  Two sides built from the same source,
one with a 400-byte pad linked first: one build per side calls that `**`; six layout builds per side, each
with a seeded pad of its own (``perfab.run.layoutbuild``), judge the build as the unit and do not.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perfab.cli import main
from perfab.run.layoutbuild import pad_sizes
from perfab.specfile import parse_spec

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None,
                                reason="needs valgrind and cc (make sysdeps)")

HOT = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) static unsigned step(unsigned x, const char *s) { return x * 31 + (unsigned)strlen(s); }
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	unsigned x = 1;
	for (long i = 0; i < n; i++)
		x = step(x, "layout" + (i & 3));
	printf("checksum: %u\n", x);
	return 0;
}
"""
SPEC = """
[experiment]
name = "offsets"
runs = {runs}
warmup = 0
perturb_seed = 11
{builds}
build = "cc -O2 -Wl,{{pad}} {{layout_cflags}} -o {{build}}/hot hot.c"

[measure]
backend = "cachegrind"
l1i = "1K,1,64"
l1d = "32K,8,64"
ll = "1M,16,64"

[[variant]]
name = "at0"
vars = {{ pad = "{here}/pad0.o" }}

[[variant]]
name = "at400"
vars = {{ pad = "{here}/pad400.o" }}

[[workload]]
name = "hot"
argv = ["{{build}}/hot", "50000"]
parser = "keyvalue"
timeout = 300

[[workload.metric]]
name = "checksum"
method = "exact"
"""


def _run(*argv: str) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """The source and the two sides' own pads (0 and 400 bytes of code before the program's)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hot.c").write_text(HOT)
    for size in (0, 400):
        skip = f".skip {size}, 0xcc\n" if size else ""
        (tmp_path / f"pad{size}.s").write_text(f'.section .text.unlikely.side,"ax",@progbits\n{skip}'
                                               '.section .note.GNU-stack,"",@progbits\n')
        subprocess.run(["cc", "-c", "-o", str(tmp_path / f"pad{size}.o"), str(tmp_path / f"pad{size}.s")], check=True)
    return tmp_path


def _rows(db: Path) -> tuple[dict, dict]:
    code, out, err = _run("report", "--db", str(db), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    return {r["metric"]: r for r in doc["rows"]}, doc


def test_one_build_per_side_calls_a_code_offset_a_change_and_says_why_it_may_be(here):
    spec = here / "one.toml"
    spec.write_text(SPEC.format(runs=2, builds="layout_builds = 1", here=here))
    code, _, err = _run("run", str(spec), "--db", str(here / "one.db"), "--no-report")
    assert code == 0, err
    rows, doc = _rows(here / "one.db")
    assert rows["I1 misses"]["verdict"] == "**" and rows["I1 misses"]["delta"] > 5  # the offset's accident
    assert rows["instructions"]["verdict"] == "flat"
    assert [w["data"] for w in doc["warnings"] if w["kind"] == "one_layout"] == [{"rows": 2}]


def test_layout_builds_judge_the_build_as_the_unit_and_see_no_change(here):
    spec = here / "six.toml"
    spec.write_text(SPEC.format(runs=12, builds="", here=here))
    assert parse_spec(spec.read_text(), str(spec)).layout_builds == 6  # cachegrind, {layout_cflags}: the default
    code, out, err = _run("run", str(spec), "--db", str(here / "six.db"))
    assert code == 0, err
    rows, doc = _rows(here / "six.db")
    assert rows["I1 misses"]["verdict"] != "**" and rows["I1 misses"]["levels"]["unit"] == "build"
    assert rows["I1 misses"]["levels"]["units_base"] == 6 and rows["instructions"]["verdict"] == "flat"
    assert doc["replication"] == {"unit": "build", "units": 6, "seed": 11,
                                  "perturbations": doc["replication"]["perturbations"]}
    assert not any(w["kind"] == "one_layout" for w in doc["warnings"])
    assert "VARIANCE: the build is the unit" in out
    starts = set()
    for program in sorted((here / ".perfab" / "build" / "offsets").glob("at0*/hot")):
        nm = subprocess.run(["nm", str(program)], capture_output=True, text=True).stdout
        starts.add(re.search(r"^([0-9a-f]+) T main$", nm, re.M).group(1))
    assert len(starts) == len({pad_sizes(11, i)[0] for i in range(6)})  # each build's code starts elsewhere


def test_a_build_that_never_links_its_pad_is_refused(here):
    spec = here / "unused.toml"
    text = SPEC.format(runs=4, builds="layout_builds = 2", here=here)
    spec.write_text(text.replace("cc -O2 -Wl,{pad} {layout_cflags} -o {build}/hot hot.c",
                                 "cc -O2 -o {build}/hot hot.c && echo {layout_cflags}"))
    code, _, err = _run("run", str(spec), "--db", str(here / "unused.db"))
    last = err.strip().splitlines()[-1]
    assert code == 2 and "layout builds made the same program" in last and last.startswith("perfab: side"), err
