"""Markdown reports of files and symbols with characters markdown would act on.

C++ and Rust symbols can hold ``|``, backticks, ``<>`` and ``*``; a file name
can hold ``|`` or a line break.  The report is parsed back with
markdown-it-py (CommonMark with GFM tables) and every cell must read as the
name it was made from, line breaks shown as ``\\n``.
"""

from __future__ import annotations

import io

import pytest
from elfwriter import write_elf
from markdown_it import MarkdownIt
from size_helpers import size_main

ODD = ["a|b", "tick`s", "new\nline", "``two``", "back\\|slash", "op<int>*_x_", "#hash&amp;", " spaced "]
CLONE = "a|b.cold"  # folds into the family of "a|b": the members cell lists both
SYMBOLS = [(name, 0x10 * i, 0x8, 0x12, 1) for i, name in enumerate(ODD + [CLONE])]


def shown(name: str) -> str:
    return name.replace("\n", "\\n")


def tables(markdown: str) -> list[list[list[str]]]:
    """Every table as rows of cell texts (code spans and text joined), header row first."""
    out, row, rows = [], None, None
    for tok in MarkdownIt("commonmark").enable("table").parse(markdown):
        if tok.type == "table_open":
            rows = []
        elif tok.type == "table_close":
            out.append(rows)
            rows = None
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close":
            rows.append(row)
            row = None
        elif tok.type == "inline" and row is not None and rows is not None:
            row.append("".join(child.content for child in tok.children or []))
    return out


@pytest.fixture
def pair(tmp_path):
    odd_dir = tmp_path / "build|`x`"
    odd_dir.mkdir()
    old = write_elf(odd_dir / "old\n.o", 64, False, symbols=SYMBOLS)
    new = write_elf(odd_dir / "new|.o", 64, False, symbols=SYMBOLS, grow={n: 4 for n in ODD + [CLONE]})
    return old, new


def run_markdown(*argv) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert size_main(["--format", "markdown", *map(str, argv)], out, err) == 0, err.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("flags", [[], ["--compat"]])
def test_markdown_escapes_pipes_backticks_and_newlines_in_names(pair, flags):
    md = run_markdown(*flags, *pair)
    function = tables(md)[0]
    assert function[0] == ["Function", "old", "new", "delta"]
    assert all(len(row) == 4 for row in function)
    assert sorted(row[0] for row in function[1:]) == sorted(shown(n) for n in ODD + [CLONE])
    if not flags:
        families = next(t for t in tables(md) if t[0][0] == "Family")
        assert all(len(row) == 6 for row in families)
        assert sorted(row[0] for row in families[1:]) == sorted(shown(n) for n in ODD)
        assert next(row[5] for row in families if row[0] == "a|b") == "a|b +4, a|b.cold +4"


def test_markdown_title_shows_file_names_with_pipes_backticks_and_newlines(pair):
    md = run_markdown(*pair)
    title = md.splitlines()[0]
    heading = MarkdownIt("commonmark").parse(title)[1]
    codes = [c.content for c in heading.children if c.type == "code_inline"]
    assert codes == [shown(str(pair[0])), shown(str(pair[1]))]


def test_markdown_warnings_name_odd_files_on_one_line(pair, tmp_path):
    md = run_markdown(*pair)
    notes = md.split("Not done:\n", 1)[1].splitlines()
    assert len(notes) == 2 and all(n.startswith("- ") for n in notes)  # no debug info, one line per file
    item = MarkdownIt("commonmark").parse(notes[0])
    expected = shown(f"{pair[0]}: no debug info: inlined/uninlined causes unavailable; build with -g")
    assert "".join(c.content for c in item[3].children) == expected
