"""Parsing that ends, output that cannot drive the terminal, outputs that never replace inputs, the 1e300 row.

- ``perfab parse`` on what is not a saved output (a FIFO, a device, a
  directory, a link to ``/dev/zero``) is refused unread; a file over
  ``stdout_cap`` is refused as ``run`` would fail it; at the cap it parses.
- A regex parser whose pattern backtracks without end fails within its
  deadline naming the metric, in ``parse``, ``plan --try`` and ``run``.
- Control bytes a workload prints reach ``plan --try`` and every report
  format escaped.
- ``run --html`` onto a side's program (directly, through a link, ``..``
  or PATH), its wrap or service program, a build product, or a kernel
  side's image, symbols or files is refused with every input unchanged.
- Values 1e-300..1e300 on both sides (the IndexError in solve_triangles)
  report in every format.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import time
from pathlib import Path

import pytest

from reliability_helpers import cli, runs_of, script, write

REGEX_SPEC = """[experiment]
name = "rx"
runs = 1
warmup = 0
stdout_cap = {cap}
[[variant]]
name = "a"
[[variant]]
name = "b"
[[workload]]
name = "w"
argv = ["{prog}"]
parser = "regex"
parser_options = {{patterns = {{ops = {pattern}}}}}
"""


def regex_spec(tmp: Path, pattern: str = r'"ops: (\\d+)"', cap: int = 4096, prog: str = "/bin/true") -> Path:
    return write(tmp / "rx.toml", REGEX_SPEC.format(cap=cap, pattern=pattern, prog=prog))


@pytest.fixture
def zoo(tmp_path) -> Path:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-zero").symlink_to("/dev/zero")
    (tmp_path / "dir").mkdir()
    write(tmp_path / "ok.out", "ops: 42\n")
    return tmp_path


NOT_SAVED = r"; give the file the workload's output was saved to$"
PARSE_REFUSED = {  # situation -> (the output file, relative to the zoo, or absolute; the one stderr line)
    "fifo": ("fifo", r"fifo is a FIFO, not a saved output" + NOT_SAVED),
    "dev-zero": ("/dev/zero", r"/dev/zero is a character device, not a saved output" + NOT_SAVED),
    "dev-null": ("/dev/null", r"/dev/null is a character device, not a saved output" + NOT_SAVED),
    "link-to-dev-zero": ("to-zero", r"to-zero is a character device, not a saved output" + NOT_SAVED),
    "directory": ("dir", r"cannot read \S*dir: Is a directory" + NOT_SAVED),
    "missing": ("nowhere.out", r"cannot read \S*nowhere\.out: No such file or directory" + NOT_SAVED),
}


@pytest.mark.parametrize("name", list(PARSE_REFUSED))
def test_parse_refuses_what_is_not_a_saved_output_unread(zoo, name):
    target, pattern = PARSE_REFUSED[name]
    spec = regex_spec(zoo)
    started = time.monotonic()
    got = cli("parse", spec, target if target.startswith("/") else zoo / target)
    got.one_line_error(2, pattern)
    assert time.monotonic() - started < 10  # never a read until MemoryError, never a wait for a writer


def test_parse_refuses_a_fifo_given_as_stderr(zoo):
    got = cli("parse", regex_spec(zoo), zoo / "ok.out", "--stderr", zoo / "fifo")
    got.one_line_error(2, r"fifo is a FIFO, not a saved output" + NOT_SAVED)


@pytest.mark.parametrize("size, stream", [(4097, "stdout"), (1 << 20, "stdout"), (4097, "stderr")])
def test_parse_refuses_output_over_stdout_cap_as_run_would(zoo, size, stream):
    big = write(zoo / "big.out", "ops: 1\n" + "x" * (size - 7))
    argv = [big] if stream == "stdout" else [zoo / "ok.out", "--stderr", big]
    got = cli("parse", regex_spec(zoo, cap=4096), *argv)
    got.one_line_error(2, r"big\.out holds more than experiment\.stdout_cap \(4,096 bytes\), and `perfab run` fails "
                          r"such a run unparsed .*; raise stdout_cap in the spec$")


@pytest.mark.parametrize("name, text", [("at-the-cap", "ops: 7\n" + "x" * (4096 - 7)), ("empty-proc-like", "ops: 7")])
def test_parse_reads_an_output_within_the_cap(zoo, name, text):
    got = cli("parse", regex_spec(zoo, cap=4096), write(zoo / "fits.out", text))
    assert got.code == 0 and re.search(r"^ops\s+7\s", got.out, re.M), (got.out, got.err)


CATASTROPHIC = [r'"(?:a|aa)+(x?)$"', r'"(?:a|a)+(x?)$"', r'"(?:aa|a)+(x?)$"']
DEADLINE = r"regex for metric 'ops' ran past its 2 s deadline on \d+ characters of output \(it backtracks without end\)"


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_backtracking_pattern_fails_parse_within_its_deadline(zoo, pattern):
    out = write(zoo / "a.out", "a" * 60 + "b\n")
    started = time.monotonic()
    got = cli("parse", regex_spec(zoo, pattern=pattern), out)
    got.one_line_error(1, "^perfab: " + DEADLINE + r": rewrite the pattern without nested or overlapping repeats "
                                                   r"such as \(a\|aa\)\+$")
    assert time.monotonic() - started < 60


def test_the_issues_pattern_no_longer_hangs(zoo):
    """``(a+)+$`` hung parse, plan --try and run; now it answers at once (here: matched nothing)."""
    out = write(zoo / "a.out", "a" * 60 + "b\n")
    started = time.monotonic()
    got = cli("parse", regex_spec(zoo, pattern=r'"((?:a+)+)$"'), out)
    got.one_line_error(1, r"regex for metric 'ops' matched nothing in the output")
    assert time.monotonic() - started < 20


def test_a_backtracking_pattern_fails_each_trial_run_naming_the_metric(zoo):
    prog = script(zoo / "as.sh", "printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\\n'\n")
    got = cli("plan", regex_spec(zoo, pattern=CATASTROPHIC[0], prog=str(prog)), "--try")
    assert got.code == 1 and "Traceback" not in got.err
    assert got.out.count("FAILED") == 2 and re.search(DEADLINE, got.out), got.out


def test_a_backtracking_pattern_fails_the_stored_run_naming_the_metric(zoo, tmp_path):
    prog = script(zoo / "as.sh", "printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\\n'\n")
    spec = regex_spec(zoo, pattern=CATASTROPHIC[0], prog=str(prog))
    got = cli("run", spec, "--db", tmp_path / "r.db", "--no-report")
    assert "Traceback" not in got.err and got.err.count("failed: output not parsed: regex for metric 'ops'") == 2
    reasons = {r[4] for r in runs_of(tmp_path / "r.db")}
    assert reasons and all(re.search("^output not parsed: " + DEADLINE, r) for r in reasons), reasons


ESCAPES = {  # situation -> what the workload prints (as printf reads it)
    "clear-screen": r"\033[2J\033[H",
    "set-title-osc": r"\033]0;owned\007",
    "c1-csi": r"\302\233" + "31m",
    "carriage-return": r"visible\rhidden",
    "backspace": r"abc\b\b\bXYZ",
    "delete": r"a\177b",
    "bell": r"ring\007",
    "nul": r"a\000b",
    "cursor-up": r"\033[3A",
}


@pytest.mark.parametrize("name", list(ESCAPES))
def test_plan_try_shows_a_workloads_control_bytes_escaped(zoo, name):
    prog = script(zoo / "w.sh", f"printf '{ESCAPES[name]}\\n'\n")
    got = cli("plan", regex_spec(zoo, prog=str(prog)), "--try")
    assert got.code == 1, got.err
    assert "stdout ends | " in got.out
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", got.out), repr(got.out)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", got.err), repr(got.err)


@pytest.fixture(scope="module")
def escaped_db(tmp_path_factory) -> Path:
    """A session whose runs failed with a reason quoting control bytes the workload printed."""
    d = tmp_path_factory.mktemp("esc")
    prog = script(d / "w.sh", "printf 'ops: \\033[2J\\033]0;t\\0077\\n'\n")
    spec = regex_spec(d, pattern=r'"ops: (.*)"', prog=str(prog))
    got = cli("run", spec, "--db", d / "r.db", "--no-report")
    assert "Traceback" not in got.err
    return d / "r.db"


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json", "html"])
def test_every_report_format_shows_a_workloads_control_bytes_escaped(escaped_db, fmt, tmp_path):
    got = cli("report", "rx", "--db", escaped_db, "--format", fmt, "-o", tmp_path / "r.out")
    assert "Traceback" not in got.err
    text = (tmp_path / "r.out").read_text()
    assert fmt == "csv" or "captured" in text, text[:400]  # CSV holds the rows, which failed runs have none of
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text[:400])


SPANS = {"a": "1e-300 1e300 0 1e300 1e300", "b": "0 -1e300 1e-300 1e-300 -1e300"}


@pytest.fixture(scope="module")
def spans_db(tmp_path_factory) -> Path:
    """The issue's data: five runs a side, the n-th run printing the n-th value."""
    d = tmp_path_factory.mktemp("spans")
    prog = script(d / "v.sh", 'f="$1.n"; n=$(cat "$f" 2>/dev/null || echo 0); echo $((n+1)) > "$f"\n'
                              'shift; eval "v=\\${$((n+1))}"; echo "ops: $v"\n')
    spec = write(d / "s.toml", f"""[experiment]
name = "spans"
runs = 5
warmup = 0
order = "sequential"
[[variant]]
name = "a"
vars = {{v = "{SPANS['a']}"}}
[[variant]]
name = "b"
vars = {{v = "{SPANS['b']}"}}
[[workload]]
name = "w"
argv = ["sh", "-c", "{prog} {d}/{{variant}} {{v}}"]
parser = "keyvalue"
[[workload.metric]]
name = "ops"
direction = "higher"
""")
    got = cli("run", spec, "--db", d / "r.db", "--no-report")
    assert got.code == 0, got.err
    return d / "r.db"


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json", "html"])
def test_values_spanning_1e300_on_both_sides_report_in_every_format(spans_db, fmt, tmp_path):
    got = cli("report", "spans", "--db", spans_db, "--format", fmt, "-o", tmp_path / "r.out")
    assert got.code == 0 and "Traceback" not in got.err, got.err
    if fmt == "json":
        rows = [r for r in json.loads((tmp_path / "r.out").read_text())["rows"] if r["metric"] == "ops"]
        assert sorted(rows[0]["base_values"], key=float) == sorted(map(float, SPANS["a"].split()))
        assert sorted(rows[0]["exp_values"], key=float) == sorted(map(float, SPANS["b"].split()))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def html_refused(tmp_path: Path, spec: Path, target: Path, what: str, protected: list[Path]) -> None:
    """``run --html TARGET`` exits 2 naming ``what``; nothing ran, every protected file is unchanged."""
    before = [_sha(p) for p in protected]
    got = cli("run", spec, "--db", tmp_path / "r.db", "--html", target)
    got.one_line_error(2, what)
    assert [_sha(p) for p in protected] == before and not (tmp_path / "r.db").exists()


def two_programs(tmp_path: Path, extra: str = "", variant_b: str = "", argv: str | None = None) -> tuple[Path, ...]:
    a = script(tmp_path / "bin-a" / "tool", "echo ops: 1\n")
    b = script(tmp_path / "bin-b" / "tool", "echo ops: 2\n")
    argv = argv or '["{dir}/tool"]'
    spec = write(tmp_path / "s.toml", f"""[experiment]
name = "guard"
runs = 1
[[variant]]
name = "a"
vars = {{dir = "{a.parent}"}}
[[variant]]
name = "b"
vars = {{dir = "{b.parent}"}}
env = {{PATH = "{b.parent}:/usr/bin:/bin"}}
{variant_b}
[[workload]]
name = "w"
argv = {argv}
{extra}
""")
    return spec, a, b


@pytest.mark.parametrize("target", ["a", "b", "link-to-b", "dotdot-to-a"])
def test_run_html_onto_a_sides_program_is_refused(tmp_path, target):
    spec, a, b = two_programs(tmp_path)
    path = {"a": a, "b": b, "link-to-b": tmp_path / "link", "dotdot-to-a": a.parent / ".." / "bin-a" / "tool"}[target]
    if target == "link-to-b":
        path.symlink_to(b)
    side = "b" if target.endswith("b") else "a"
    html_refused(tmp_path, spec, path, f"is the workload program of side '{side}'", [a, b])


def test_run_html_onto_a_program_found_on_the_sides_path_is_refused(tmp_path):
    spec, a, b = two_programs(tmp_path, argv='["tool"]')
    html_refused(tmp_path, spec, b, "is the workload program of side 'b'", [a, b])


def test_run_html_onto_the_wrap_program_is_refused(tmp_path):
    wrapper = script(tmp_path / "wrap.sh", 'exec "$@"\n')
    spec, a, b = two_programs(tmp_path, variant_b=f'wrap = ["{wrapper}"]')
    html_refused(tmp_path, spec, wrapper, "is the wrap program of side 'b'", [a, b, wrapper])


def test_run_html_onto_the_service_program_is_refused(tmp_path):
    server = script(tmp_path / "server.sh", "sleep 30\n")
    spec, a, b = two_programs(tmp_path, extra=f'[workload.service]\nargv = ["{server}"]')
    html_refused(tmp_path, spec, server, "is the service program of side 'a'", [a, b, server])


def test_run_html_into_a_sides_build_directory_is_refused(tmp_path):
    spec = write(tmp_path / "s.toml", """[experiment]
name = "built"
runs = 1
build = ["sh", "-c", "mkdir -p {build} && cp /bin/true {build}/prog"]
[[variant]]
name = "a"
[[variant]]
name = "b"
[[workload]]
name = "w"
argv = ["{build}/prog"]
""")
    target = tmp_path / ".perfab" / "build" / "built" / "b" / "prog"
    got = cli("run", spec, "--db", tmp_path / "r.db", "--html", target, cwd=tmp_path)
    got.one_line_error(2, r"is (inside the build directory of side 'b'|the workload program of side 'b')")
    assert not (tmp_path / "r.db").exists() and not target.exists()


IMAGES = sorted(glob.glob("/boot/vmlinuz-*"))


@pytest.mark.skipif(not IMAGES, reason="needs linux-image-amd64")
@pytest.mark.parametrize("target", ["image", "image-link", "symbols", "system-map-beside", "files", "inside-files"])
def test_run_html_onto_what_a_kernel_side_reads_is_refused(tmp_path, target):
    boot = tmp_path / "boot"
    boot.mkdir()
    image = boot / "vmlinuz-9.9.9-test"
    image.write_bytes(Path(IMAGES[-1]).read_bytes())
    write(boot / "System.map-9.9.9-test", "ffffffff81000000 T _text\n")
    symbols = write(tmp_path / "sym.map", "ffffffff81000000 T _text\n")
    data = write(tmp_path / "data" / "input.bin", b"\x01\x02")
    extra = write(tmp_path / "extra.txt", "copied in\n")
    spec = write(tmp_path / "k.toml", f"""[experiment]
name = "kguard"
runs = 1
[[variant]]
name = "a"
[variant.kernel]
image = "{image}"
[[variant]]
name = "b"
[variant.kernel]
image = "{image}"
symbols = "{symbols}"
[[workload]]
name = "w"
argv = ["/bin/true"]
[measure]
backend = "guest"
accel = "tcg"
files = ["{data.parent}", "{extra}"]
""")
    link = tmp_path / "link"
    link.symlink_to(image)
    path, what = {"image": (image, "is the kernel image of side 'a'"),
                  "image-link": (link, "is the kernel image of side 'a'"),
                  "symbols": (symbols, "is the kernel symbols of side 'b'"),
                  "system-map-beside": (boot / "System.map-9.9.9-test", "is the kernel symbols of side 'a'"),
                  "files": (extra, r"is the file copied into the guests \(measure\.files\)"),
                  "inside-files": (data, r"is inside the file copied into the guests \(measure\.files\)")}[target]
    html_refused(tmp_path, spec, path, what, [image, symbols, data, extra])
