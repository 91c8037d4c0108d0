"""``perfab size OLD NEW --format html``: the size diff as one page of sortable tables.

The page shows size(1)-like totals, the changed families with their causes
(members listed in the row, so sorting keeps them together), the inline
sites that changed, bloat-o-meter's table, the section accounting, and what
was not done.  Every table sorts by a click on a column header (numbers by
value: each numeric cell carries it in ``data-v``); the script that does it
is the page's only one and is pinned by its hash in the page's policy.

``SizeDiff.inline_changes`` holds the inline reader's text listing
(``perfab.size.inline.format_inline_changes``: fixed columns, the callee in
the first 34); ``inline_rows`` reads it back into rows, and lines it does
not recognise are shown as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfab.report.html.page import document
from perfab.report.html.svg import esc
from perfab.size import SizeDiff
from perfab.size.causes import CAUSE_KINDS

CALLEE_COLUMNS = 34  # width of the callee column in the inline listing
_NUMBERS = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+([+-]?\d+)\s*$")


@dataclass(frozen=True)
class InlineRow:
    """One changed inlined callee, as read back from the inline listing."""

    callee: str  # inlined function (cut to 33 characters with "..." by the listing)
    sites_old: int  # inline sites in the old file
    sites_new: int  # inline sites in the new file
    bytes_per_site_old: float  # inclusive bytes per site, old
    bytes_per_site_new: float  # inclusive bytes per site, new
    delta_bytes: int  # inclusive bytes, new - old
    where: str = ""  # the largest caller change with its call site, e.g. "f.c:12 in main (+40)"


def inline_rows(listing: str | None) -> tuple[list[InlineRow], list[str]]:
    """(rows, other lines) of an inline listing; the header and rule are dropped."""
    rows: list[InlineRow] = []
    other: list[str] = []
    for line in (listing or "").splitlines():
        found = _NUMBERS.match(line[CALLEE_COLUMNS:]) if len(line) > CALLEE_COLUMNS else None
        if found and line[:CALLEE_COLUMNS].strip() != "inlined callee":
            so, sn, bo, bn, d = found.groups()
            rows.append(InlineRow(line[:CALLEE_COLUMNS].strip(), int(so), int(sn), float(bo), float(bn), int(d)))
        elif line.startswith("    ") and rows and not rows[-1].where:
            last = rows[-1]
            rows[-1] = InlineRow(last.callee, last.sites_old, last.sites_new, last.bytes_per_site_old,
                                 last.bytes_per_site_new, last.delta_bytes, line.strip())
        elif line.strip() and not line.startswith(("inlined callee", "-----")):
            other.append(line.strip())
    return rows, other


def _num(v: int | float | None, signed: bool = False, fmt: str = "d") -> str:
    if v is None:
        return '<td class="num" data-v="-Infinity">-</td>'
    shown = format(v, ("+" if signed else "") + fmt)
    return f'<td class="num" data-v="{v}">{shown}</td>'


def _table(head: list[tuple[str, bool]], rows: list[str], cls: str = "sortable") -> str:
    cells = "".join(f'<th class="{"num" if numeric else ""}" scope="col">{esc(h)}</th>' for h, numeric in head)
    return f'<table class="{cls}"><thead><tr>{cells}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _cut(items: list, limit: int, delta) -> tuple[list, str]:
    """The ``limit`` items of largest |delta|, in their order, and a line saying what the rest add up to."""
    if not limit or len(items) <= limit:
        return items, ""
    keep = set(sorted(range(len(items)), key=lambda i: -abs(delta(items[i])))[:limit])
    rest = [delta(x) for i, x in enumerate(items) if i not in keep]
    up, down = sum(x for x in rest if x > 0), sum(x for x in rest if x < 0)
    note = f"{len(rest)} more not shown (up +{up}, down {down}, net {up + down:+d}); --limit 0 shows all"
    return [x for i, x in enumerate(items) if i in keep], note


def _totals(d: SizeDiff) -> str:
    totals = d.kind_totals()
    rows = [f"<tr><td>{esc(k)}</td>{_num(o)}{_num(n)}{_num(n - o, True)}</tr>" for k, (o, n) in totals.items()]
    old, new = sum(o for o, _ in totals.values()), sum(n for _, n in totals.values())
    head = [("kind", False), ("old", True), ("new", True), ("delta", True)]
    return (f"<h2>Sizes (like size(1))</h2>{_table(head, rows)}"
            f'<p class="muted">total: {old} -> {new} bytes ({new - old:+d})</p>')


def _families(d: SizeDiff, limit: int) -> str:
    fams = list(d.families)
    kept, cut = _cut(fams, limit, lambda f: f.delta_bytes)
    summary = []
    for kind in CAUSE_KINDS:
        deltas = [f.delta_bytes for f in fams if f.cause.kind == kind]
        if deltas:
            summary.append(f"<li>{esc(kind)}: {len(deltas)} families, net {sum(deltas):+d} bytes</li>")
    rows = []
    for f in kept:
        members = ", ".join(f"{m.name} {m.delta_bytes:+d}" for m in f.members) \
            if len(f.members) > 1 or f.members[0].name != f.name else ""
        name = f.name if f.file is None else f"{f.name} [{f.file}]"
        rows.append(f"<tr><td><code>{esc(name)}</code></td><td>{esc(f.kind)}</td>{_num(f.old_bytes)}"
                    f"{_num(f.new_bytes)}{_num(f.delta_bytes, True)}<td>{esc(f.cause.kind)}</td>"
                    f"<td>{esc(f.cause.text)}</td><td class=\"members\">{esc(members)}</td></tr>")
    head = [("family", False), ("kind", False), ("old", True), ("new", True), ("delta", True), ("cause", False),
            ("why", False), ("members", False)]
    return (f"<h2 id=\"families\">Families: {len(fams)} changed</h2><ul>{''.join(summary)}</ul>"
            + _table(head, rows, "sortable families") + (f'<p class="muted">{esc(cut)}</p>' if cut else ""))


def _inline(d: SizeDiff) -> str:
    if d.inline_changes is None:
        return ""
    rows, other = inline_rows(d.inline_changes)
    body = [f"<tr><td><code>{esc(r.callee)}</code></td>{_num(r.sites_old)}{_num(r.sites_new)}"
            f"{_num(r.bytes_per_site_old, fmt='.1f')}{_num(r.bytes_per_site_new, fmt='.1f')}"
            f"{_num(r.delta_bytes, True)}<td>{esc(r.where)}</td></tr>" for r in rows]
    head = [("inlined callee", False), ("sites old", True), ("sites new", True), ("B/site old", True),
            ("B/site new", True), ("delta", True), ("largest caller change", False)]
    table = _table(head, body, "sortable inline") if rows else ""
    notes = "".join(f'<p class="muted">{esc(line)}</p>' for line in other)
    return f'<h2 id="inline">Inline sites that changed</h2>{table}{notes}'


def _symbols(d: SizeDiff, limit: int) -> str:
    out = []
    for t in d.tables:
        kept, cut = _cut(list(t.rows), limit, lambda r: r[3])
        rows = [f"<tr><td><code>{esc(n)}</code></td>{_num(o)}{_num(nw)}{_num(dl, True)}</tr>" for n, o, nw, dl in kept]
        head = [(t.title, False), ("old", True), ("new", True), ("delta", True)]
        total = f"Total: Before={t.old_total_bytes}, After={t.new_total_bytes}, chg {_pct(t)}"
        out.append(f"<h3>{esc(t.title)}</h3>" + _table(head, rows) + f'<p class="muted">{esc(total)}'
                   + (f"; {esc(cut)}" if cut else "") + "</p>")
    return "<h2 id=\"symbols\">Symbols (bloat-o-meter)</h2>" + "".join(out) if out else ""


def _pct(t) -> str:
    if not t.old_total_bytes:
        return "-"
    return f"{100 * (t.new_total_bytes - t.old_total_bytes) / t.old_total_bytes:+.2f}%"


def _sections(d: SizeDiff) -> str:
    changed = [s for s in d.sections if s.delta_bytes or s.symbol_delta_bytes or s.overlap_delta_bytes]
    if not changed:
        return ""
    rows = []
    for s in changed:
        ok = s.symbol_delta_bytes - s.overlap_delta_bytes + s.uncovered_delta_bytes == s.delta_bytes
        rows.append(f"<tr><td><code>{esc(s.name)}</code></td><td>{esc(s.kind)}</td>{_num(s.old_bytes)}"
                    f"{_num(s.new_bytes)}{_num(s.delta_bytes, True)}{_num(s.symbol_delta_bytes, True)}"
                    f"{_num(s.overlap_delta_bytes, True)}{_num(s.uncovered_delta_bytes, True)}"
                    f"<td>{'ok' if ok else 'MISMATCH'}</td></tr>")
    head = [("section", False), ("kind", False), ("old", True), ("new", True), ("delta", True), ("symbols", True),
            ("overlap", True), ("uncovered", True), ("check", False)]
    return ("<h2 id=\"sections\">Accounting</h2><p class=\"muted\">section delta = symbol deltas - overlap delta + "
            "bytes no symbol covers</p>" + _table(head, rows))


def render_size_html(d: SizeDiff, limit: int = 50) -> str:
    """The diff as one page; ``limit`` rows per table, largest |delta| kept (0: all)."""
    parts = [f"<h1>perfab size: <code>{esc(d.old_path)}</code> \u2192 <code>{esc(d.new_path)}</code></h1>",
             '<p class="lead">Click a column header to sort by it; click again to reverse.</p>']
    if not d.compat:
        parts += [_totals(d), _families(d, limit), _inline(d)]
    parts.append(_symbols(d, limit))
    if not d.compat:
        parts.append(_sections(d))
    if d.warnings:
        parts.append("<h2>Not done</h2><ul class=\"warnings\">" + "".join(f"<li>{esc(w)}</li>" for w in d.warnings)
                     + "</ul>")
    return document(f"perfab size: {d.old_path} -> {d.new_path}", "\n".join(p for p in parts if p), sortable=True)
