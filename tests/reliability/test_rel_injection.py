"""Injection through names, labels, argv and stderr: every report format stays well formed and inert.

A hostile string (table pipes and backticks, a script tag, an attribute
breakout, ampersands, an ANSI escape, spreadsheet formula openers, a very
long label) is put where a spec or a workload can put it.  Names the spec
reader refuses are asserted refused, exactly; everywhere text is accepted
(metric labels, argv, the workload's stderr) real runs of a tiny ``sh``
workload are stored and reported in every format: markdown rows keep their
column count, CSV parses to one width with formula-like text neutralised and
numbers left numbers, JSON is strict, HTML carries no tag from the data, and
the terminal gets no control byte.
"""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reliability_helpers import cli, runs_of, write

HOSTILE = {
    "pipe-backticks": "a | `b` | c",
    "script-tag": "<script>alert(1)</script>",
    "img-breakout": '"><img src=x onerror=x>',
    "ampersands": "x & y &amp; z &lt;",
    "ansi-escape": "\x1b[31mred\x1b[0m \x1b]0;title\x07",
    "formula-equals": "=cmd()",
    "formula-at": "@x",
    "formula-plus": "+x",
    "long-label": "L" * 600,
}

# Side names the reader accepts although they open like a formula or a negative number.
SIDES = ("+x base", "-1")

# The workload: a script in its cwd, so the command line is short and the hostile argument shows in full.
# The first run of the session fails with the hostile text (and an ANSI escape) as its last stderr line.
WORKLOAD = r"""
if [ ! -e failed-once ]; then
    : > failed-once
    printf '\033[1m%s\n' "$1" >&2
    exit 3
fi
echo "ops: $((100 + $$ % 7))"
echo "lat: -$((30 + $$ % 5)).5"
printf '%s\n' "$1" >&2
"""

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def toml_string(text: str) -> str:
    """A TOML basic string (JSON escapes are TOML escapes for every character used here)."""
    return json.dumps(text)


def hostile_spec(tmp: Path, bad: str, runs: int = 2) -> Path:
    write(tmp / "w.sh", WORKLOAD)
    return write(tmp / "s.toml", f"""[experiment]
name = "inject"
runs = {runs}
warmup = 0

[[variant]]
name = "{SIDES[0]}"

[[variant]]
name = "{SIDES[1]}"

[[workload]]
name = "w"
argv = ["sh", "w.sh", {toml_string(bad)}]
cwd = "{tmp}"
parser = "keyvalue"

[[workload.metric]]
name = "ops"
label = {toml_string(bad)}
direction = "higher"

[[workload.metric]]
name = "lat"
label = "latency"
unit = "ms"
direction = "lower"
""")


@pytest.fixture(scope="module", params=list(HOSTILE), ids=list(HOSTILE))
def session(request, tmp_path_factory):
    """A stored session whose metric label, argv and one failed run's stderr carry the hostile string."""
    tmp = tmp_path_factory.mktemp(request.param)
    bad = HOSTILE[request.param]
    db = tmp / "r.db"
    out = cli("run", hostile_spec(tmp, bad, runs=3), "--db", db)
    assert out.code == 0 and "Traceback" not in out.err, out.err
    statuses = [status for _, _, _, status, _ in runs_of(db)]
    assert statuses == ["failed"] + ["ok"] * 5, statuses
    return tmp, db, bad, out


def report(db: Path, fmt: str) -> str:
    out = cli("report", "--db", db, "--format", fmt)
    assert out.code == 0 and "Traceback" not in out.err and out.err == "", out.err
    return out.out


def markdown_cells(row: str) -> list[str]:
    """The cells of a markdown table row, splitting only at pipes no backslash escapes."""
    cells, cell, i = [], "", 0
    body = row.strip()
    assert body.startswith("|") and body.endswith("|") and not body.endswith("\\|"), row
    body = body[1:-1]
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            cell += body[i:i + 2]
            i += 2
            continue
        if body[i] == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += body[i]
        i += 1
    return cells + [cell]


def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


class Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


# -- names the spec reader refuses -------------------------------------------

REFUSED_NAMES = {k: v for k, v in HOSTILE.items() if k not in ("formula-plus", "long-label")}


@pytest.mark.parametrize("where", ["variant", "workload", "experiment"])
@pytest.mark.parametrize("bad", list(REFUSED_NAMES.values()), ids=list(REFUSED_NAMES))
def test_hostile_names_are_refused_by_the_reader(tmp_path, where, bad):
    """A variant, workload or experiment name with markup, pipes, escapes or a formula opener: refused in one
    line (exit 2) naming the key and the characters a name may use; nothing is stored."""
    names = {"variant": ["a", "b"], "workload": "w", "experiment": "e"}
    if where == "variant":
        names["variant"] = [bad, "b"]
    else:
        names[where] = bad
    spec = write(tmp_path / "n.toml", f"""[experiment]
name = {toml_string(names["experiment"])}
runs = 2
warmup = 0

[[variant]]
name = {toml_string(names["variant"][0])}

[[variant]]
name = "b"

[[workload]]
name = {toml_string(names["workload"])}
argv = ["true"]
""")
    key = {"variant": "variant[0].name", "workload": "workload[0].name", "experiment": "experiment.name"}[where]
    expected = (f"perfab: {spec}: {key}: {bad!r} is not a usable name; "
                "use letters, digits, '_', '-', '.', '+' and spaces")
    for command in (("plan", spec), ("run", spec, "--db", tmp_path / "r.db")):
        out = cli(*command)
        out.one_line_error(2, "^" + re.escape(expected) + "$")
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("name", ["+x", "-1", "a.b + c", "@x"], ids=["plus", "minus-number", "dots-spaces", "at"])
def test_formula_like_side_names_the_reader_accepts_or_refuses(tmp_path, name):
    """Side names may open with '+' or '-' and hold '.' and spaces (accepted, listed verbatim by `plan`); '@' is
    not a name character (refused in one line)."""
    spec = write(tmp_path / "n.toml", f'[experiment]\nname = "e"\nruns = 2\nwarmup = 0\n\n'
                                      f'[[variant]]\nname = {toml_string(name)}\n\n[[variant]]\nname = "b"\n\n'
                                      '[[workload]]\nname = "w"\nargv = ["echo", "{variant}"]\n')
    out = cli("plan", spec)
    if name == "@x":
        out.one_line_error(2, re.escape("variant[0].name: '@x' is not a usable name"))
        return
    # accepted: stderr holds only plan's warning that 2 runs per side never reach alpha by the rank test
    assert out.code == 0 and all(line.startswith("perfab: warning: with 2 run(s) per side") for line in
                                 out.err.splitlines()), out.err
    assert [line.split("  w  ")[1].strip().rsplit(" block", 1)[0].strip() for line in out.out.splitlines()
            if "  w  " in line] == ["b", name, name, "b"], out.out


# -- one real session per hostile string, through every format ----------------

def test_markdown_rows_keep_their_column_count(session):
    """Every markdown table row has as many cells as its header, and the hostile label is one cell, on one line."""
    _, db, bad, _ = session
    text = report(db, "markdown")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) >= 4, text
    width = len(markdown_cells(rows[0]))
    assert width == 6, rows[0]
    assert all(len(markdown_cells(r)) == width for r in rows), rows
    first = [markdown_cells(r)[0].strip() for r in rows[2:]]
    unescaped = [re.sub(r"\\(.)", r"\1", c) for c in first]
    assert bad in unescaped, first


def test_csv_has_one_width_neutralised_formulas_and_numeric_numbers(session):
    """CSV parses to a constant column count; a label opening with =, +, - or @ is quoted off with a leading
    apostrophe, the side name "-1" stays as written, and every numeric column parses as a float
    (negative medians and the unbounded "-inf" interval end included)."""
    _, db, bad, _ = session
    records = list(csv.reader(io.StringIO(report(db, "csv"))))
    assert len({len(r) for r in records}) == 1, records
    header = records[0]
    rows = [dict(zip(header, r)) for r in records[1:]]
    by_metric = {r["metric"]: r for r in rows}
    expected_label = ("'" + bad) if bad[0] in "=+-@" else bad
    assert by_metric["ops"]["label"] == expected_label
    assert {r["variant"] for r in rows} == {"-1"}
    for r in rows:
        for cell in r.values():
            assert not cell or cell[0] not in "=@" , r
            if cell and cell[0] in "+-":
                float(cell)  # only a number may open with a sign
        for column in ("median_base", "median_exp", "n_base", "n_exp", "p", "q"):
            float(r[column])
        for column in ("ci_lo", "ci_hi", "shift_lo", "shift_hi"):
            assert r[column] == "" or isinstance(float(r[column]), float), r[column]
    assert float(by_metric["lat"]["median_base"]) < 0 and float(by_metric["lat"]["median_exp"]) < 0
    assert by_metric["lat"]["median_base"].startswith("-")


def test_json_is_strict_and_holds_the_text_exactly(session):
    """JSON parses with NaN and Infinity refused, and holds the label, the side names, the argv and the failed
    run's reason (its escape shown as text) exactly."""
    _, db, bad, _ = session
    doc = strict_json(report(db, "json"))
    assert doc["baseline"] == SIDES[0] and doc["variants"] == [SIDES[1]]
    assert [r["label"] for r in doc["rows"] if r["metric"] == "ops"] == [bad]
    (workload,) = doc["workloads"]
    assert workload["command"] == f"sh w.sh {bad}"
    (reasons,) = workload["failed"].values()
    last_line = ("\x1b[1m" + bad)[:120]  # the last stderr line, cut to 120 characters, then made visible
    assert reasons == ["exit status 3: " + re.sub(r"[\x00-\x08\x0b-\x1f\x7f\x9b]",
                                                 lambda m: f"\\x{ord(m.group()):02x}", last_line)]


def test_html_report_file_carries_no_tag_from_the_data(session):
    """`report --format html -o FILE`: no script, img or other active tag and no on* attribute, whatever the
    label, command or stderr held; the hostile text is there only as text."""
    tmp, db, bad, _ = session
    page_file = tmp / "report.html"
    out = cli("report", "--db", db, "--format", "html", "-o", page_file)
    assert out.code == 0 and out.out == "" and out.err == "", out.err
    page = page_file.read_text()
    parser = Tags()
    parser.feed(page)
    parser.close()
    tags = {tag for tag, _ in parser.tags}
    assert not tags & {"script", "img", "iframe", "object", "embed", "image", "foreignobject"}, tags
    assert all(not name.startswith("on") for _, attrs in parser.tags for name, _ in attrs)
    assert all(not (value or "").lower().startswith("javascript:") for _, attrs in parser.tags for _, value in attrs)
    if "<" in bad:
        assert bad not in page
    text = "".join(parser.text)
    assert bad.replace("\n", " ") in text or bad[:60] in text


def test_text_report_and_run_output_have_no_control_bytes(session):
    """Text (the run's own report and `report --format text`): no ESC or other control byte from the label,
    the command or the workload's stderr; the failed run's reason shows its escape as \\x1b, and the table still
    fits 80 columns."""
    _, db, bad, run = session
    for text in (run.out, run.err, report(db, "text")):
        assert not CONTROL.search(text), repr(CONTROL.search(text))
    flat = " ".join(report(db, "text").split())
    assert f"Failed runs on {SIDES[0]}: 1 (exit status 3: \\x1b[1m" in flat or \
        f"Failed runs on {SIDES[1]}: 1 (exit status 3: \\x1b[1m" in flat, flat
    if bad.startswith("\x1b"):
        assert "\\x1b[31mred" in flat
    table = report(db, "text").split("\nMetric")[1].split("\n\n")[0].splitlines()
    assert all(len(line) <= 80 for line in table), max(table, key=len)


def test_long_label_is_clipped_in_text_and_kept_whole_elsewhere(tmp_path):
    """A 600-character label: the text table stays within 80 columns, markdown keeps one row per metric, CSV and
    JSON keep the label whole."""
    bad = HOSTILE["long-label"]
    db = tmp_path / "r.db"
    out = cli("run", hostile_spec(tmp_path, bad), "--db", db, "--no-report")
    assert out.code == 0, out.err
    text = report(db, "text")
    table = text.split("\nMetric")[1].split("\n\n")[0].splitlines()
    assert all(len(line) <= 80 for line in table), max(table, key=len)
    assert any(line.startswith("L" * 10) and "..." in line for line in table)
    records = list(csv.reader(io.StringIO(report(db, "csv"))))
    assert [dict(zip(records[0], r))["label"] for r in records[1:]].count(bad) == 1
    assert [r["label"] for r in strict_json(report(db, "json"))["rows"]].count(bad) == 1


def test_failing_workload_stderr_is_inert_in_every_format(tmp_path):
    """Every run of one side fails with ANSI colour, a script tag, pipes and a formula on stderr: the session is
    stored with each reason, and text has no ESC, markdown keeps its columns, CSV its width, JSON is strict and
    HTML has no tag from it."""
    noise = "\x1b[31m<script>alert(2)</script> | `x` =cmd() \"><img onerror=x>\x1b[0m"
    spec = write(tmp_path / "f.toml", f"""[experiment]
name = "fail"
runs = 2
warmup = 0
max_failures = 10

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["sh", "-c", "echo 'ops: 1'; test {{variant}} = a || {{ printf '%s\\n' \\"$0\\" >&2; exit 9; }}",
        {toml_string(noise)}]
parser = "keyvalue"
""")
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db)
    assert out.code == 1 and "Traceback" not in out.err
    reason = "exit status 9: \\x1b[31m<script>alert(2)</script> | `x` =cmd() \"><img onerror=x>\\x1b[0m"
    assert [(v, s, r) for _, v, _, s, r in runs_of(db) if v == "b"] == [("b", "failed", reason)] * 2
    assert not CONTROL.search(out.out + out.err)
    assert f"Failed runs on b: 2 (2x {reason})" in " ".join(out.out.split())
    md = cli("report", "--db", db, "--format", "markdown")
    assert md.code == 1
    rows = [line for line in md.out.splitlines() if line.startswith("|")]
    assert rows and len({len(markdown_cells(r)) for r in rows}) == 1
    # Markup outside the command's code span is escaped; inside a code span markdown shows it as text.
    prose = [line for line in md.out.splitlines() if not line.startswith("`")]
    assert not any(re.search(r"(?<!\\)<(script|img)", line) for line in prose), prose
    assert "\\<script\\>alert(2)\\</script\\>" in md.out
    records = list(csv.reader(io.StringIO(cli("report", "--db", db, "--format", "csv").out)))
    assert len({len(r) for r in records}) == 1
    doc = strict_json(cli("report", "--db", db, "--format", "json").out)
    assert doc["workloads"][0]["failed"] == {"b": [reason, reason]}
    page = cli("report", "--db", db, "--format", "html").out
    parser = Tags()
    parser.feed(page)
    assert not {tag for tag, _ in parser.tags} & {"script", "img"}
    assert "<script>alert(2)" not in page and "&lt;script&gt;alert(2)&lt;/script&gt;" in page


def test_argv_with_an_escape_sequence_stays_off_the_terminal(tmp_path):
    """An argv element holding a clear-screen escape (and a C1 CSI) is printed in the text report as \\x1b[2J,
    never as the byte, and kept exactly in JSON."""
    bad = "\x1b[2J\x9b2J"
    db = tmp_path / "r.db"
    out = cli("run", hostile_spec(tmp_path, bad), "--db", db)
    assert out.code == 0, out.err
    assert not CONTROL.search(out.out)
    assert "    sh w.sh \\x1b[2J\\x9b2J\n" in out.out
    doc = strict_json(report(db, "json"))
    assert doc["workloads"][0]["command"] == f"sh w.sh {bad}"
