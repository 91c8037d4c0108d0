"""Print profile rows the way the kernel test robot prints ``perf-profile`` rows.

The robot (lkp-tests ``compare``) writes, per metric::

         24.77 ±  2%      +8.1       32.86 ±  3%  perf-profile.self.cycles-pp.llist_add_batch

that is: the baseline mean (``%10.2f``), its relative standard deviation
(`` ±%3d%%``, the percent truncated to an integer, or six blanks when it is
2% or less), the change in percentage points (``%+10.1f``), two blanks, the
experiment mean and deviation in the same form, two blanks, the metric name.
perfab keeps those widths and adds one thing: a ``*`` in the first column
(always blank, as shares never exceed 100.00) marks a significant change.

The numbers take 46 columns, so a row fits in 80 columns when the key is 34
characters or less; longer keys run past 80 rather than being cut, because a
cut symbol name can no longer be searched for in the source.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from perfab.errors import UsageError
from perfab.analyse.profiles import ProfileRow

HEADER = (
    "         %stddev   change pp         %stddev",
    "             \\          |                \\",
)
WIDTH = 80


def _spread(rsd_pct: float) -> str:
    if not math.isfinite(rsd_pct) or rsd_pct <= 2:
        return " " * 6
    return f" ±{int(rsd_pct):3d}%"


def format_row(row: ProfileRow) -> str:
    """One row in the robot's columns, ``*`` in column 1 when significant."""
    base = f"{row.base_mean:10.2f}"
    if row.significant:
        base = "*" + base[1:]
    return (
        f"{base}{_spread(row.base_rsd_pct)}{row.delta_pp:+10.1f}  "
        f"{row.exp_mean:10.2f}{_spread(row.exp_rsd_pct)}  {row.symbol}"
    )


def _footer(rows: Sequence[ProfileRow], shown: int, limit: int | None) -> list[str]:
    lines = []
    for warning in getattr(rows, "warnings", ()):
        lines.extend(textwrap.wrap(f"note: {warning}", WIDTH, subsequent_indent="  "))
    method = getattr(rows, "method", None)
    alpha = getattr(rows, "alpha", None)
    if method is not None and alpha is not None:
        lines.append(f"* significant: {method}, alpha {alpha:g}")
    else:
        lines.append("* significant change")
    beyond = len(rows) - shown
    parts = [f"{beyond} past limit {limit}" if limit is not None else "no row limit"]
    if hasattr(rows, "dropped") and hasattr(rows, "min_share"):
        parts.append(f"{rows.dropped} under {rows.min_share:g}% on both sides")
    lines.append(f"rows cut: {beyond + getattr(rows, 'dropped', 0)} ({', '.join(parts)})")
    return lines


def format_profile_rows(rows: Sequence[ProfileRow], limit: int | None = 30) -> str:
    """The header, the first ``limit`` rows (all when None) and a footer.

    The footer shows the comparison's warnings, what ``*`` means, and, last,
    how many rows were cut: past ``limit``, and (for ``compare_profiles``
    results) under ``min_share`` on both sides.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise UsageError(f"row limit must be a whole number >= 0 or None, not {limit!r}")
    shown = len(rows) if limit is None else min(limit, len(rows))
    lines = [*HEADER, *(format_row(r) for r in rows[:shown]), *_footer(rows, shown, limit)]
    return "\n".join(lines) + "\n"
