"""``perfab size OLD NEW --format html``: families with causes, inline sites, sortable tables."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from html_helpers import cells, parse
from html_size import size_cli

from perfab.report.html.size import InlineRow, inline_rows, render_size_html
from perfab.size import diff_files
from perfab.size.inline import InlineChange, format_inline_changes

RECORDED_LISTING = Path(__file__).resolve().parents[1] / "size_inline" / "golden" / "format_inline_changes.txt"


def _rows(doc, cls: str) -> list[list[str]]:
    return [cells(tr) for tr in doc.all("table", cls)[0].all("tbody")[0].all("tr")]


def test_every_family_is_listed_with_its_cause(size_pair, tmp_path):
    out = tmp_path / "size.html"
    code, stdout, stderr = size_cli("--format", "html", "--limit", "0", "-o", out, *size_pair)
    assert (code, stdout, stderr) == (0, "", "")
    families = json.loads(size_cli("--format", "json", *size_pair)[1])["families"]
    rows = _rows(parse(out.read_text()), "families")
    assert [r[0] for r in rows] == [f["name"] if f["file"] is None else f"{f['name']} [{f['file']}]" for f in families]
    assert [int(r[4]) for r in rows] == [f["delta_bytes"] for f in families]
    assert [(r[5], r[6]) for r in rows] == [(f["cause"]["kind"], f["cause"]["text"]) for f in families]
    summ = next(r for r in rows if r[0] == "sum")
    assert summ[5] == "clone" and summ[6].startswith("clone .cold appeared") and summ[7] == "sum +8, sum.cold +37"


def test_numeric_cells_carry_their_value_for_sorting(size_pair):
    page = size_cli("--format", "html", *size_pair)[1]
    doc = parse(page)
    table = doc.all("table", "families")[0]
    assert "sortable" in table.attrs["class"]
    for tr in table.all("tbody")[0].all("tr"):
        old, new, delta = (td.attrs.get("data-v") for td in tr.all("td")[2:5])
        as_int = lambda v: 0 if v == "-Infinity" else int(v)  # noqa: E731
        assert as_int(new) - as_int(old) == int(delta)


def test_limit_keeps_the_largest_changes_and_sums_the_rest(size_pair):
    doc = parse(size_cli("--format", "html", "--limit", "3", *size_pair)[1])
    rows = _rows(doc, "families")
    assert [r[0] for r in rows] == ["main", "use_mix", "once"]
    assert "14 more not shown" in doc.text() and "--limit 0 shows all" in doc.text()


def test_page_runs_only_its_own_hashed_script(size_pair):
    page = size_cli("--format", "html", *size_pair)[1]
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)[1]
    assert "default-src 'none'" in policy and re.search(r"script-src 'sha256-[A-Za-z0-9+/=]{44}'", policy)
    assert page.count("<script>") == 1 and "src=" not in page


def test_recorded_inline_listing_reads_back_into_rows():
    rows, other = inline_rows(RECORDED_LISTING.read_text())
    assert rows == [
        InlineRow("_raw_spin_unlock", 0, 152, 0.0, 18.5, 2812, "kernel/fork.c:2381 in copy_process (+2812)"),
        InlineRow("copy_mm", 0, 1, 0.0, 2242.0, 2242, "kernel/fork.c:2263 in copy_process (+2242)"),
        InlineRow("a_callee_name_long_enough_to_b...", 3, 2, 40.0, 40.0, -40, "x.c:1 in f (-40)"),
    ]
    assert other == ["(2 more changed callees not shown, inclusive delta +6 bytes)"]
    assert inline_rows("inline sites: no change\n") == ([], ["inline sites: no change"])


def _change(callee: str, sites: tuple[int, int], incl: tuple[int, int], callers=()) -> InlineChange:
    return InlineChange(callee, sites[0], sites[1], incl[0] / sites[0] if sites[0] else 0.0,
                        incl[1] / sites[1] if sites[1] else 0.0, incl[0], incl[1], incl[0], incl[1],
                        tuple(callers), tuple(f"a.c:{i} in {c}" for i, (c, _) in enumerate(callers)))


def test_inline_rows_match_what_the_reader_formatted():
    changes = [_change("folded_away", (12, 0), (0, 0)),
               _change("big", (1, 3000), (90, 123456), [("caller_one", 123366)]),
               _change("shrinks", (40, 40), (4000, 3960), [("g", -40)])]
    rows, other = inline_rows(format_inline_changes(changes))
    assert other == []
    assert [(r.callee, r.sites_old, r.sites_new, r.delta_bytes) for r in rows] == [
        ("folded_away", 12, 0, 0), ("big", 1, 3000, 123366), ("shrinks", 40, 40, -40)]
    assert rows[0].where == "" and rows[1].where == "a.c:0 in caller_one (+123366)"
    assert (rows[1].bytes_per_site_old, rows[1].bytes_per_site_new) == (90.0, 41.2)


def test_inline_sites_table(size_pair):
    d = replace(diff_files(*size_pair, dwarf=False), inline_changes=RECORDED_LISTING.read_text())
    doc = parse(render_size_html(d))
    rows = _rows(doc, "inline")
    assert rows[0] == ["_raw_spin_unlock", "0", "152", "0.0", "18.5", "+2812",
                       "kernel/fork.c:2381 in copy_process (+2812)"]
    assert len(rows) == 3 and "(2 more changed callees not shown" in doc.text()


def test_hostile_symbol_names_are_escaped(size_pair):
    d = diff_files(*size_pair, dwarf=False)
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    fam = replace(d.families[0], name=evil, file=evil)
    page = render_size_html(replace(d, families=(fam, *d.families[1:]), warnings=(evil,), old_path=evil))
    assert "<img" not in page and page.count("<script>") == 1  # the sorter only
    assert _rows(parse(page), "families")[0][0] == f"{evil} [{evil}]"


def test_unwritable_output_is_one_line_exit_2(size_pair, tmp_path):
    code, out, err = size_cli("--format", "html", "-o", tmp_path / "no" / "x.html", *size_pair)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("perfab size: cannot write")


def test_other_formats_are_unchanged_by_the_output_option(size_pair, tmp_path):
    out = tmp_path / "size.txt"
    assert size_cli("-o", out, *size_pair)[:2] == (0, "")
    assert out.read_text() == size_cli(*size_pair)[1]
