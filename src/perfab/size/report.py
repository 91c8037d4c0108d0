"""Print a ``SizeDiff`` as text, markdown or JSON.

The text report opens with bloat-o-meter's own header, rows and total line,
so the numbers people know come first; then size(1)-like totals, the
families with their causes, and the accounting of every changed section.
A listing cut to ``limit`` rows keeps the largest |delta| and states what
the cut rows add up to.  In compat mode the text is bloat-o-meter's, byte
for byte.  Files built for different targets (``target``) open the text and
markdown reports with a warning.

Markdown escapes what markdown would act on: names and file names go in
code spans fenced past their own backticks, with ``|`` escaped inside table
cells; other text is backslash-escaped; line breaks show as ``\\n``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict

from perfab.size import compat as C
from perfab.size.causes import CAUSE_KINDS
from perfab.size.diff import FamilyRow, SizeDiff
from perfab.size.symbols import KINDS

W = 40  # bloat-o-meter's name column


def _cut(items: list, limit: int, delta) -> tuple[list, list]:
    """(kept, cut): the ``limit`` items of largest |delta|; limit 0 keeps all."""
    if not limit or len(items) <= limit:
        return items, []
    ranked = sorted(range(len(items)), key=lambda i: -abs(delta(items[i])))
    keep = set(ranked[:limit])
    return [x for i, x in enumerate(items) if i in keep], [x for i, x in enumerate(items) if i not in keep]


def _cut_line(what: str, cut: list, delta) -> str:
    up = sum(delta(x) for x in cut if delta(x) > 0)
    down = sum(delta(x) for x in cut if delta(x) < 0)
    biggest = max(abs(delta(x)) for x in cut)
    return (f"... {len(cut)} {what} cut (each |delta| <= {biggest}): up +{up}, down {down}, net {up + down:+d}; "
            "--limit 0 shows all")


def _table_lines(t: C.SymbolTable, limit: int) -> list[str]:
    kept, cut = _cut(list(t.rows), limit, lambda r: r[3])
    lines = [C.header_line(t), f"{t.title:<{W}} {'old':>7} {'new':>7} {'delta':>7}"]
    lines += [C.row_line(*r) for r in kept]
    if cut:
        lines.append(_cut_line("rows", cut, lambda r: r[3]))
    lines.append(C.total_line(t.old_total_bytes, t.new_total_bytes))
    return lines


def _n(v: int | None) -> str:
    return "-" if v is None else str(v)


def _sizes_lines(d: SizeDiff) -> list[str]:
    totals = d.kind_totals()
    lines = ["", f"{'Sizes (like size(1))':<{W}} {'old':>10} {'new':>10} {'delta':>8}"]
    for k in KINDS:
        o, n = totals[k]
        lines.append(f"{k:<{W}} {o:>10} {n:>10} {n - o:+8d}")
    o, n = sum(v[0] for v in totals.values()), sum(v[1] for v in totals.values())
    lines.append(f"{'total':<{W}} {o:>10} {n:>10} {n - o:+8d}")
    return lines


def _family_lines(d: SizeDiff, limit: int) -> list[str]:
    fams = list(d.families)
    kept, cut = _cut(fams, limit, lambda f: f.delta_bytes)
    lines = ["", f"Families: {len(fams)} changed (clones, .cold parts and __pfx_/__cfi_ folded into their function; "
                 "largest |delta| first)"]
    lines += _cause_summary(fams)
    lines.append(f"{'Family':<{W}} {'old':>7} {'new':>7} {'delta':>7}  cause")
    for f in kept:
        lines.append(f"{_fam_name(f, d):<{W}} {_n(f.old_bytes):>7} {_n(f.new_bytes):>7} {f.delta_bytes:+7d}  "
                     f"{f.cause.text}")
        if len(f.members) > 1 or f.members[0].name != f.name:
            for m in f.members:
                lines.append(f"{'  ' + m.name:<{W}} {_n(m.old_bytes):>7} {_n(m.new_bytes):>7} {m.delta_bytes:+7d}")
    if cut:
        lines.append(_cut_line("families", cut, lambda f: f.delta_bytes))
    return lines


def _cause_summary(fams: list[FamilyRow]) -> list[str]:
    """One line per cause kind: how many families, and their bytes up, down and net."""
    lines = []
    for kind in CAUSE_KINDS:
        deltas = [f.delta_bytes for f in fams if f.cause.kind == kind]
        if deltas:
            up, down = sum(x for x in deltas if x > 0), sum(x for x in deltas if x < 0)
            lines.append(f"  {kind:<10} {len(deltas):>6} families  up +{up}, down {down}, net {up + down:+d}")
    return ["By cause:"] + lines if lines else []


def _fam_name(f: FamilyRow, d: SizeDiff) -> str:
    return f.name if f.file is None else f"{f.name} [{f.file}]"


def _accounting_lines(d: SizeDiff, limit: int) -> list[str]:
    rows = [s for s in d.sections if s.delta_bytes or s.symbol_delta_bytes or s.overlap_delta_bytes]
    kept, cut = _cut(rows, limit, lambda s: s.delta_bytes)
    lines = ["", "Accounting: section delta = symbol deltas - overlap delta + bytes no symbol covers"]
    lines.append(f"{'Section':<24} {'old':>10} {'new':>10} {'delta':>8} {'symbols':>8} {'overlap':>8} "
                 f"{'uncovered':>9}  check")
    for s in kept:
        ok = s.symbol_delta_bytes - s.overlap_delta_bytes + s.uncovered_delta_bytes == s.delta_bytes
        lines.append(
            f"{s.name:<24} {s.old_bytes:>10} {s.new_bytes:>10} {s.delta_bytes:+8d} {s.symbol_delta_bytes:+8d} "
            f"{s.overlap_delta_bytes:+8d} {s.uncovered_delta_bytes:+9d}  {'ok' if ok else 'MISMATCH'}"
        )
    if cut:
        lines.append(_cut_line("sections", cut, lambda s: s.delta_bytes))
    unchanged = len(d.sections) - len(rows)
    if unchanged:
        lines.append(f"({unchanged} allocated sections unchanged, not listed)")
    lines += _check_lines(d)
    return lines


def _check_lines(d: SizeDiff) -> list[str]:
    lines = []
    fam_sum = sum(f.delta_bytes for f in d.families)
    kinds = {f.kind for f in d.families} or set(KINDS)
    sym_sum = sum(s.symbol_delta_bytes for s in d.sections if s.kind in kinds)
    verdict = "ok" if fam_sum == sym_sum else "MISMATCH (symbols outside any section, e.g. COMMON)"
    lines.append(f"Families add up to {fam_sum:+d} bytes; "
                 f"symbol deltas of the sections they live in: {sym_sum:+d}: {verdict}")
    c = d.coverage
    if c is not None:
        text = (f"Function symbols cover {c.old_text_pct:.1f}% (old) and {c.new_text_pct:.1f}% (new) "
                "of executable sections")
        if c.old_inline_pct is not None or c.new_inline_pct is not None:
            text += (f"; inline ranges cover {_pct(c.old_inline_pct)} (old) and {_pct(c.new_inline_pct)} (new) "
                     "of the changed functions' bytes")
        lines.append(text + ".")
    return lines


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def format_text(d: SizeDiff, limit: int = 50) -> str:
    """The text report; ``limit`` rows per listing (0: all)."""
    if d.compat:
        return C.format_compat(list(d.tables)) if not limit else "\n".join(
            line for t in d.tables for line in _table_lines(t, limit)) + "\n"
    lines: list[str] = [f"WARNING: {d.mismatch}", ""] if d.mismatch else []
    for t in d.tables:
        lines += _table_lines(t, limit)
    lines += _sizes_lines(d) + _family_lines(d, limit) + _accounting_lines(d, limit)
    if d.inline_changes:
        lines += ["", "Inline sites that changed:", d.inline_changes.rstrip("\n")]
    if d.warnings:
        lines += ["", "Not done:"] + [f"- {w}" for w in d.warnings]
    return "\n".join(lines) + "\n"


def format_markdown(d: SizeDiff, limit: int = 50) -> str:
    """The report as markdown tables (a review comment, a cover letter draft)."""
    out = [f"### perfab size: {_md_code(d.old_path, False)} -> {_md_code(d.new_path, False)}", ""]
    if d.mismatch:
        out += [f"> **Warning:** {_md_text(d.mismatch)}", ""]
    for t in d.tables:
        out += _md_table(t, limit)
    if not d.compat:
        totals = d.kind_totals()
        out += ["| Sizes (like size(1)) | old | new | delta |", "|---|---:|---:|---:|"]
        out += [f"| {k} | {o} | {n} | {n - o:+d} |" for k, (o, n) in totals.items()]
        out += [""] + [f"- {line.strip()}" for line in _cause_summary(list(d.families))[1:]] + [""]
        out += _md_families(d, limit) + [""] + _check_lines(d)
    if d.warnings:
        out += ["", "Not done:"] + [f"- {_md_text(w)}" for w in d.warnings]
    return "\n".join(out) + "\n"


_MD_PUNCT = re.compile(r"([\\`*_\[\]<>|~&#])")


def _md_text(text: str) -> str:
    """Markdown text that renders as ``text``: markup characters backslash-escaped
    (a bare | would end a table cell), line breaks shown as \\n."""
    return _MD_PUNCT.sub(r"\\\1", text).replace("\r", "\\\\r").replace("\n", "\\\\n")


def _md_code(text: str, in_table: bool = True) -> str:
    """``text`` as an inline code span (CommonMark 6.1): fenced by more backticks than
    it holds in a row, padded when it starts or ends with one; in a table, | escaped
    (GFM 4.10); line breaks shown as \\n.

    A table cell cannot hold ``\\|`` in code: GitHub's table scanner reads ``\\\\``
    as one escape and splits at the pipe after it; such text is escaped plain text.
    """
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    if not text:
        return ""
    if in_table and "\\|" in text:
        return _md_text(text)
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_table(t: C.SymbolTable, limit: int) -> list[str]:
    kept, cut = _cut(list(t.rows), limit, lambda r: r[3])
    out = [f"`{C.header_line(t)}`", "", f"| {t.title} | old | new | delta |", "|---|---:|---:|---:|"]
    out += [f"| {_md_code(n)} | {_n(o)} | {_n(nw)} | {dl:+d} |" for n, o, nw, dl in kept]
    if cut:
        out.append(f"| {_md_text(_cut_line('rows', cut, lambda r: r[3]))} | | | |")
    return out + ["", f"`{C.total_line(t.old_total_bytes, t.new_total_bytes)}`", ""]


def _md_families(d: SizeDiff, limit: int) -> list[str]:
    kept, cut = _cut(list(d.families), limit, lambda f: f.delta_bytes)
    out = ["| Family | old | new | delta | cause | members |", "|---|---:|---:|---:|---|---|"]
    for f in kept:
        members = ", ".join(f"{_md_code(m.name)} {m.delta_bytes:+d}" for m in f.members if len(f.members) > 1)
        cells = [_md_code(_fam_name(f, d)), _n(f.old_bytes), _n(f.new_bytes), f"{f.delta_bytes:+d}",
                 _md_text(f.cause.text), members]
        out.append(f"| {' | '.join(cells)} |")
    if cut:
        out.append(f"| {_md_text(_cut_line('families', cut, lambda f: f.delta_bytes))} | | | | | |")
    return out


def to_json(d: SizeDiff) -> str:
    """Every field of the diff, plus the derived deltas and checks, as JSON."""
    doc = asdict(d)
    doc["kind_totals"] = {k: {"old_bytes": o, "new_bytes": n} for k, (o, n) in d.kind_totals().items()}
    for f, row in zip(d.families, doc["families"]):
        row["delta_bytes"] = f.delta_bytes
        row["cause"] = {"kind": f.cause.kind, "text": f.cause.text}
    for s, row in zip(d.sections, doc["sections"]):
        row.update(delta_bytes=s.delta_bytes, symbol_delta_bytes=s.symbol_delta_bytes,
                   overlap_delta_bytes=s.overlap_delta_bytes, uncovered_delta_bytes=s.uncovered_delta_bytes)
    doc["tables"] = [
        {**{k: v for k, v in asdict(t).items() if k != "rows"},
         "rows": [{"name": n, "old_bytes": o, "new_bytes": nw, "delta_bytes": dl} for n, o, nw, dl in t.rows]}
        for t in d.tables
    ]
    return json.dumps(doc, indent=2) + "\n"


def render(d: SizeDiff, fmt: str, limit: int) -> str:
    """Dispatch on ``fmt``: text, markdown or json (json is never cut)."""
    if fmt == "json":
        return to_json(d)
    return format_markdown(d, limit) if fmt == "markdown" else format_text(d, limit)
