"""format_profile_rows against the robot's own lines and a golden file.

The golden file tests/data/profile/format_rows.golden was written by this
formatter and checked column by column against the lkp-tests layout; when the
layout changes on purpose, rewrite it with
``format_profile_rows(golden_rows(), limit=6)`` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfab.errors import UsageError
from perfab.profile import ProfileRow, ProfileRows, format_profile_rows, format_row

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "profile" / "format_rows.golden"


def row(symbol, base, base_rsd, exp, exp_rsd, significant=False, n=3):
    return ProfileRow(symbol, base, base_rsd, exp - base, exp, exp_rsd, significant, n, n, 0.5)


def golden_rows() -> ProfileRows:
    rows = [
        row("self.cpu-clock:u.hot_a", 98.81, 0.4, 0.0, 0.0, significant=True),
        row("self.cpu-clock:u.hot_b", 0.0, 0.0, 98.67, 0.6, significant=True),
        row("self.cpu-clock:k.clear_page_erms", 3.08, 4.7, 2.05, 4.2),
        row("self.cpu-clock:k._raw_spin_unlock_irqrestore", 0.77, 16.9, 0.32, 33.3),
        row("self.cpu-clock:k.exc_page_fault", 2.04, 2.0, 1.64, 2.99),
        row("self.cpu-clock:u.[md5sum]", 0.02, 141.4, 0.07, 25.0),
        row("self.cpu-clock:k.do_syscall_64", 0.5, 1.0, 0.45, 1.0),
        row("self.cpu-clock:k.vfs_read", 0.5, 1.0, 0.49, 1.0),
    ]
    return ProfileRows(
        rows,
        dropped=17,
        min_share=0.5,
        alpha=0.05,
        method="Welch t-test, Benjamini-Hochberg FDR",
    )


def test_output_matches_the_golden_file():
    assert format_profile_rows(golden_rows(), limit=6) == GOLDEN.read_text()


@pytest.mark.parametrize(
    ("robot_line", "args"),
    [
        # seed 004, lkp report on 6035152d8e
        (
            "     24.77 ±  2%      +8.1       32.86 ±  3%  perf-profile.self.cycles-pp.llist_add_batch",
            (24.77, 2.4, 32.86, 3.5),
        ),
        # lkp stress-ng pipeherd report on cc03a5d65a: no spread printed at or under 2%
        (
            "     18.98            -5.8       13.18        perf-profile.self.cycles-pp.intel_idle",
            (18.98, 1.9, 13.18, 2.0),
        ),
        (
            "      0.02 ±141%      +0.1        0.07 ± 25%  perf-profile.self.cycles-pp.perf_swevent_event",
            (0.02, 141.4, 0.07, 25.9),
        ),
    ],
)
def test_rows_reproduce_the_robots_lines(robot_line, args):
    base, base_rsd, exp, exp_rsd = args
    symbol = robot_line.split()[-1]
    assert format_row(row(symbol, base, base_rsd, exp, exp_rsd)) == robot_line


def test_significant_rows_are_starred_without_moving_columns():
    plain = format_row(row("s", 99.5, 0.0, 1.0, 0.0))
    starred = format_row(row("s", 99.5, 0.0, 1.0, 0.0, significant=True))
    assert starred == "*" + plain[1:] and plain[0] == " "


def test_rows_with_short_keys_fit_80_columns_and_the_last_line_counts_cuts():
    text = format_profile_rows(golden_rows(), limit=3)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[-1] == "rows cut: 22 (5 past limit 3, 17 under 0.5% on both sides)"


def test_warnings_are_wrapped_to_80_columns_above_the_legend():
    rows = golden_rows()
    rows.warnings.append(
        "need >= 2 profiled runs per side for a t-test (have 1 and 3); no row is marked significant"
    )
    lines = format_profile_rows(rows, limit=0).splitlines()
    assert lines[2:5] == [
        "note: need >= 2 profiled runs per side for a t-test (have 1 and 3); no row is",
        "  marked significant",
        "* significant: Welch t-test, Benjamini-Hochberg FDR, alpha 0.05",
    ]


def test_plain_list_and_no_limit():
    rows = list(golden_rows())
    lines = format_profile_rows(rows, limit=None).splitlines()
    assert len(lines) == 2 + len(rows) + 2
    assert lines[-1] == "rows cut: 0 (no row limit)"


@pytest.mark.parametrize("limit", [-1, 2.5, True])
def test_bad_limit_is_a_usage_error(limit):
    with pytest.raises(UsageError, match="row limit must be a whole number"):
        format_profile_rows(golden_rows(), limit=limit)
