"""Each kernel side's code size against the baseline's, kept with the session so that the report can print it.

``[measure] size = true`` (guest backend, kernels built from source) runs
``perfab size`` on the baseline side's vmlinux and each other side's once,
when the session begins, and stores what it found with the session's
sources (``sources[side]["size"]``): the text table, cut to ``ROWS`` rows
per listing, and the size(1)-like totals.  The report prints the tables in
its SIZE block, so they stay with the counts after the kernel cache is
cleaned or a kernel is rebuilt.  A kernel built with DEBUG_INFO (e.g.
``DEBUG_INFO_DWARF5 = "y"``) gives each changed function its inline
causes and lists the inline sites that changed; without it the causes come
from the symbols alone.
"""

from __future__ import annotations

from pathlib import Path

from perfab.kernel.sides import KernelImage

ROWS = 25  # rows per listing of the stored table; the rest are summed into one line


def side_sizes(kernels: dict[str, KernelImage], baseline: str, say) -> dict[str, dict]:
    """Side -> ``{"size": ...}`` for every side but ``baseline`` whose vmlinux and the baseline's exist."""
    base = kernels.get(baseline)
    if base is None or base.vmlinux is None:
        return {}
    out = {}
    for side, kernel in kernels.items():
        if side != baseline and kernel.vmlinux is not None:
            say(f"size: {side}'s vmlinux against {baseline}'s (perfab size)")
            out[side] = {"size": size_entry(base.vmlinux, kernel.vmlinux, baseline)}
    return out


def size_entry(old: Path, new: Path, against: str) -> dict:
    """What the session stores of one diff: the side it is against, the two files, the table and the totals."""
    from perfab.size.diff import diff_files  # imported on use: numpy and the DWARF reader are not free
    from perfab.size.report import format_text

    diff = diff_files(old, new)
    totals = {kind: {"old_bytes": o, "new_bytes": n} for kind, (o, n) in diff.kind_totals().items()}
    return {"against": against, "old": str(old), "new": str(new), "text": format_text(diff, ROWS),
            "totals": totals}
