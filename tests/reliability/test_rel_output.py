"""Hostile text in reports: labels, commands and workload output that try to break a format or run code.

One real session per hostile string (a metric label, the command line and
the workload's stderr all carry it); every format must stay well formed:
markdown rows keep their columns, CSV parses to one width and cannot start
a formula, JSON is strict (no NaN), HTML carries no tag from the data, and
the terminal gets no escape byte.
"""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reliability_helpers import cli, write

HOSTILE = {
    "pipe-and-backticks": "ops | `rm -rf` | x",
    "script-tag": "<script>alert(1)</script>",
    "img-onerror": '"><img src=x onerror=alert(1)>',
    "ampersand-entities": "a &amp; b &lt; c",
    "formula-equals": '=HYPERLINK("http://evil","x")',
    "formula-at": "@SUM(A1:A9)",
    "formula-plus": "+cmd|' /C calc'!A0",
    "formula-minus": "-2+3+cmd|' /C calc'!A0",
    "rtl-override": "ops \u202egnp.exe",
    "long-label": "L" * 300,
}


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


@pytest.fixture(scope="module", params=list(HOSTILE))
def session(request, tmp_path_factory):
    """A finished two-sided session whose metric label, argv and stderr carry the hostile string."""
    tmp = tmp_path_factory.mktemp(request.param)
    bad = HOSTILE[request.param]
    toml_bad = json.dumps(bad)  # a TOML basic string is a JSON string for these characters
    spec = write(tmp / "s.toml", f"""[experiment]
name = "inject"
runs = 3
warmup = 0

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["sh", "-c", "echo \\"ops: $((10 + $$ % 7))\\"; echo \\"$0\\" >&2", {toml_bad}]
parser = "keyvalue"

[[workload.metric]]
name = "ops"
label = {toml_bad}
direction = "higher"
""")
    db = tmp / "r.db"
    out = cli("run", spec, "--db", db, "--no-report")
    assert out.code == 0, out.err
    return db, bad


def report(db: Path, fmt: str) -> str:
    out = cli("report", "--db", db, "--format", fmt)
    assert out.code == 0 and "Traceback" not in out.err, out.err
    return out.out


def test_markdown_rows_keep_their_columns(session):
    """Every markdown table row has as many cells as its header, whatever the label holds."""
    db, _ = session
    text = report(db, "markdown")
    tables: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            if not tables or tables[-1] is None:
                tables.append([])
            tables[-1].append(line)
        elif tables and tables[-1] is not None:
            tables.append(None)
    for table in filter(None, tables):
        width = len(table[0].replace("\\|", "").split("|"))
        assert all(len(row.replace("\\|", "").split("|")) == width for row in table), table


def test_csv_parses_to_one_width_and_starts_no_formula(session):
    """CSV: one column count for every record; no text cell begins with =, +, -, @; numbers stay numbers."""
    db, bad = session
    records = list(csv.reader(io.StringIO(report(db, "csv"))))
    assert len({len(r) for r in records}) == 1
    header = records[0]
    for record in records[1:]:
        for name, cell in zip(header, record):
            if cell and cell[0] in "=+-@":
                float(cell)  # only a number may start so
    labels = [dict(zip(header, r))["label"] for r in records[1:] if dict(zip(header, r))["metric"] == "ops"]
    assert labels and labels[0].lstrip("'") == bad


def test_json_is_strict_and_keeps_the_label(session):
    """JSON parses with NaN/Infinity refused, and holds the label exactly as written."""
    db, bad = session

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    doc = json.loads(report(db, "json"), parse_constant=refuse)
    assert [r["label"] for r in doc["rows"] if r["metric"] == "ops"] == [bad]


def test_html_carries_no_tag_from_the_data(session):
    """HTML: the label shows as text; no <script> or <img> and no on* attribute comes from it."""
    db, bad = session
    page = report(db, "html")
    parser = Tags()
    parser.feed(page)
    assert not any(tag in ("img", "iframe", "object") for tag, _ in parser.tags)
    assert all(not name.startswith("on") for _, attrs in parser.tags for name, _ in attrs)
    if "<" in bad:
        assert bad not in page and "alert(1)</script>" not in page  # only ever escaped


def test_terminal_text_has_no_escape_bytes_or_broken_lines(session):
    """Text: no ESC or other control byte, and no table line wider than the report's width."""
    db, _ = session
    text = report(db, "text")
    assert not any(ord(c) < 32 and c != "\n" for c in text)
    table = text.split("Metric")[1].split("\n\n")[0].splitlines()
    assert all(len(line) <= 80 for line in table), max(table, key=len)


def test_workload_stderr_with_escapes_and_markup_is_neutralised(tmp_path):
    """A failing workload prints an ANSI escape and a script tag: the text report has no ESC byte, the HTML no tag."""
    spec = write(tmp_path / "f.toml", """[experiment]
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
argv = ["sh", "-c", "test {variant} = a || { printf '\\\\033[31m<script>alert(2)</script>\\\\n' >&2; exit 9; }"]
""")
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db)
    assert out.code == 1 and "\x1b" not in out.out + out.err
    assert "exit status 9" in out.out
    page = cli("report", "--db", db, "--format", "html").out
    parser = Tags()
    parser.feed(page)
    assert "alert(2)</script>" not in page and "&lt;script&gt;alert(2)" in page
