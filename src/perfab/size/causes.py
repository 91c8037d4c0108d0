"""Why a family changed size: one cause per row, from symbols and inline sites.

From the symbol tables alone a family is ``new``, ``removed``, had a clone
appear or vanish (``clone``: ``foo`` became ``foo.isra``), or kept its
members and changed size (``body``).  With each side's inline sites (DWARF
``DW_TAG_inlined_subroutine`` ranges, ``perfab.size.inline``) the first two
sharpen: a function that vanished while the new file has inlined copies of
it was ``inlined`` (into its only caller, or at K sites), and a function that
appeared while the old file had inlined copies was ``uninlined``.  A body
change also names what the family's functions now inline, or no longer do,
so "copy_process +3726" reads "now inlines copy_mm".

The sites are those of the changed families' functions (``diff`` reads no
others): the copies a function gained or lost when it was inlined or
uninlined sit in callers that changed with it, and a copy in a function
that kept its size is not counted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfab.size.families import PREFIXES, FamilyMember, clone_label, family_base

CAUSE_KINDS = ("new", "removed", "inlined", "uninlined", "clone", "body")


@dataclass(frozen=True)
class Cause:
    """Why one family's size changed."""

    kind: str  # one of CAUSE_KINDS
    text: str  # the phrase the report prints, e.g. "inlined into its only caller main"


class _Grouped:
    """Inline sites grouped by a family base; a group's sites are built when it is asked for."""

    def __init__(self, groups: dict[str, list], build):
        self.groups = groups  # family base -> the group's sites, or their positions for ``build``
        self.build = build  # the group -> its list of ``InlineSite``

    def get(self, base: str, default=None):
        """The sites of family ``base`` in DWARF order, or ``default``."""
        found = self.groups.get(base)
        return default if found is None else self.build(found)

    def count(self, base: str) -> int:
        """How many sites family ``base`` has."""
        return len(self.groups.get(base, ()))


@dataclass(frozen=True)
class InlineView:
    """One side's inline sites, grouped by the families of callee and caller."""

    by_callee: _Grouped  # callee family base -> its sites
    by_caller: _Grouped  # family base of the out-of-line caller -> the sites it inlines directly (nested ones
    # come with their parent)

    @classmethod
    def of(cls, index) -> InlineView | None:
        """Group an ``InlineIndex`` (None stays None).

        Over the reader's columns, sites are grouped by position, ``family_base``
        runs once per distinct name, and values are built only for the groups a
        cause asks for: a vmlinux diff's 37,000 sites per file are mostly
        nested ones, which no cause lists.
        """
        if index is None:
            return None
        if index.columns is None:
            callee: dict[str, list[Any]] = defaultdict(list)
            caller: dict[str, list[Any]] = defaultdict(list)
            for site in index.sites:
                callee[family_base(site.callee)].append(site)
                if site.parent is None:
                    caller[family_base(site.caller)].append(site)
            return cls(_Grouped(callee, list), _Grouped(caller, list))
        cols = index.columns
        bases = [family_base(name) for name in cols.strings]
        direct = np.flatnonzero(cols.parent < 0)
        return cls(_Grouped(_positions(bases, cols.callee, np.arange(len(cols.callee))), cols.sites_at),
                   _Grouped(_positions(bases, cols.caller[direct], direct), cols.sites_at))


def _positions(bases: list[str], ids: np.ndarray, positions: np.ndarray) -> dict[str, list[int]]:
    """Family base of the name with string id ``ids[k]`` -> the ``positions[k]`` under it, in order."""
    out: dict[str, list[int]] = defaultdict(list)
    for name_id, at in zip(ids.tolist(), positions.tolist()):
        out[bases[name_id]].append(at)
    return out


def explain(base: str, members: list[FamilyMember], old: InlineView | None, new: InlineView | None) -> Cause:
    """The cause of one family's change; ``old``/``new`` None when that side has no DWARF."""
    in_old = any(m.old_bytes is not None for m in members)
    in_new = any(m.new_bytes is not None for m in members)
    if not in_old:
        return _appeared(base, old)
    if not in_new:
        return _vanished(base, new)
    appeared = [m.name for m in members if m.old_bytes is None and not m.name.startswith(PREFIXES)]
    vanished = [m.name for m in members if m.new_bytes is None and not m.name.startswith(PREFIXES)]
    extra = _inline_detail(base, old, new)
    if appeared or vanished:
        parts = [f"{_label(n, base)} appeared" for n in appeared] + [f"{_label(n, base)} vanished" for n in vanished]
        return Cause("clone", "; ".join(["clone " + ", ".join(parts)] + extra))
    return Cause("body", "; ".join(["body changed"] + extra))


def _label(member: str, base: str) -> str:
    return clone_label(member, base) or f"plain {base}"


def _appeared(base: str, old: InlineView | None) -> Cause:
    sites = old.by_callee.get(base, []) if old else []
    if sites:
        return Cause("uninlined", f"uninlined: was inlined {_where(sites)}")
    return Cause("new", "new")


def _vanished(base: str, new: InlineView | None) -> Cause:
    sites = new.by_callee.get(base, []) if new else []
    if not sites:
        return Cause("removed", "removed")
    return Cause("inlined", f"inlined {_where(sites)}")


def _where(sites: list[Any]) -> str:
    """Where the inlined copies are, named by their source-level caller (the enclosing inline, if any).

    One call in the source can leave several copies when its caller is itself
    inlined: the calls per caller are counted within one concrete function.
    """
    callers = sorted({family_base(s.parent or s.caller) for s in sites})
    calls = Counter((s.caller, s.parent) for s in sites).most_common(1)[0][1]
    copies = f" ({len(sites)} copies)" if len(sites) > 1 else ""
    if len(callers) == 1 and calls == 1:
        return f"into its only caller {callers[0]}{copies}"
    if len(callers) == 1:
        return f"at {len(sites)} sites in {callers[0]}"
    return f"at {len(sites)} sites in {len(callers)} functions"


def _inline_detail(base: str, old: InlineView | None, new: InlineView | None, top: int = 2) -> list[str]:
    """What the family's functions inline directly now and did not before, and the reverse."""
    if old is None or new is None:
        return []
    direct_old = old.by_caller.get(base, [])  # direct sites only: nested inlines come with their parent
    direct_new = new.by_caller.get(base, [])
    before = Counter(family_base(s.callee) for s in direct_old)
    after = Counter(family_base(s.callee) for s in direct_new)
    bytes_after = Counter()
    for s in direct_new:
        bytes_after[family_base(s.callee)] += s.inclusive_bytes
    gained = sorted((c for c in after if after[c] > before.get(c, 0)), key=lambda c: (-bytes_after[c], c))
    lost = sorted(c for c in before if before[c] > after.get(c, 0))
    out = []
    if gained:
        shown = ", ".join(f"{c} ({_sites(after[c] - before.get(c, 0))})" for c in gained[:top])
        out.append(f"now inlines {shown}" + (f" and {len(gained) - top} more" if len(gained) > top else ""))
    if lost:
        more = f" and {len(lost) - top} more" if len(lost) > top else ""
        out.append(f"no longer inlines {', '.join(lost[:top])}{more}")
    grew = new.by_callee.count(base) - old.by_callee.count(base)
    if grew:
        out.append(f"inlined at {abs(grew)} {'more' if grew > 0 else 'fewer'} site{'s' if abs(grew) != 1 else ''}")
    return out


def _sites(n: int) -> str:
    return f"{n} site" if n == 1 else f"{n} sites"
