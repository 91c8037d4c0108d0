"""What a DWARF pass over the changed functions' compile units only would cost.

    .venv/bin/python bench/size_dwarf_subset.py OLD NEW

The explained diff (``perfab size OLD NEW``) reads every compile unit of
both files: its listing of changed inline sites counts each callee's sites
over the whole binary (sites old/new, bytes per site), so it needs them all.
Causes alone need fewer: a family's inlined copies sit in functions that
changed too.  This script measures how much of the DWARF walk a pass limited
to the units holding a changed function would keep.

For each file it times the reader's walk of every unit on one thread
(``perfab_native.unit_costs``: load time, then per unit its walk time and
the ELF symbols at its functions' entries), takes the changed families'
members from the symbol-level diff (``diff_files(dwarf=False)``) and sums
the walk time of the units that hold one of them (names compared with every
``.NUMBER`` removed).  Prints units and seconds, all against needed, per file.
Finding those units without walking needs an address-to-unit map
(``.debug_aranges``), which this does not time.
"""

from __future__ import annotations

import argparse
import sys

from perfab.size.compat import NUMBER_RE
from perfab.size.diff import diff_files


def changed_members(old: str, new: str) -> set[str]:
    """Names (``.NUMBER`` removed) of the members of every changed function family."""
    diff = diff_files(old, new, dwarf=False)
    return {m.name for row in diff.families if row.kind == "text" for m in row.members if m.old_bytes != m.new_bytes}


def subset_cost(path: str, wanted: set[str]) -> tuple[float, int, int, float, float]:
    """(load s, units, units needed, walk s of all units, walk s of the needed ones) for one file."""
    import perfab_native

    costs = perfab_native.unit_costs(path)
    if costs is None:
        sys.exit(f"{path}: no .debug_info")
    load_s, units = costs
    needed = [s for s, names in units if any(NUMBER_RE.sub("", n) in wanted for n in names)]
    return load_s, len(units), len(needed), sum(s for s, _ in units), sum(needed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    args = ap.parse_args(argv)
    wanted = changed_members(args.old, args.new)
    print(f"{len(wanted)} changed function names (members of changed text families)")
    print(f"{'file':<40} {'load s':>7} {'units':>7} {'needed':>7} {'walk s':>7} {'needed s':>9} {'share':>6}")
    for path in (args.old, args.new):
        load_s, n, k, walk_s, need_s = subset_cost(path, wanted)
        print(f"{path[-40:]:<40} {load_s:>7.3f} {n:>7} {k:>7} {walk_s:>7.3f} {need_s:>9.3f} {need_s / walk_s:>6.1%}")
    print("walk seconds on one thread; the diff walks units on every CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
