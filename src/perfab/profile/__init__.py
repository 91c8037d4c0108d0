"""Per-symbol profiles: where each side spends its samples, and what moved.

Optional beside any measurement backend, one step per module:

1. ``record``  wraps a run in ``perf record`` (``ProfileRecorder.wrap``) and
               afterwards reads each symbol's self share from ``perf report``
               (``ProfileRecorder.collect``).
2. ``parse``   turns ``perf report`` text into ``self.<event>:<level>.<symbol>``
               shares in percent of samples.
3. ``perfab.analyse.profiles`` sets the runs of two sides against each
               other per symbol: mean, relative spread, change in percentage
               points, Welch t-test (with the analysis, whose FDR it shares).
4. ``format``  prints the rows in the kernel test robot's ``perf-profile``
               columns.
"""

from __future__ import annotations

from perfab.analyse.profiles import ProfileRow, ProfileRows, benjamini_hochberg, compare_profiles, welch_p
from perfab.profile.format import format_profile_rows, format_row
from perfab.profile.parse import ProfileReport, SymbolShare, parse_report
from perfab.profile.record import ProfileRecorder, default_event, run_report

__all__ = [
    "ProfileRecorder",
    "ProfileReport",
    "ProfileRow",
    "ProfileRows",
    "SymbolShare",
    "benjamini_hochberg",
    "compare_profiles",
    "default_event",
    "format_profile_rows",
    "format_row",
    "parse_report",
    "run_report",
    "welch_p",
]
