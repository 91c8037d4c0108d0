"""Damaged tool output: a parser refuses it with its one-line ParseError, or leaves the damaged value out.

For each parser, a real recorded output (``tests/data/<tool>/``, the command
that produced it beside it) has its headline number replaced by a damaged
one.  What is owed is never a wrong number: either the parser's ParseError
naming the tool, or the other metrics exactly as before with the damaged
one absent.  End to end, a run whose output cannot be read is stored as
failed with that reason and never reaches a verdict.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfab.parsers import ParseError, get_parser
from reliability_helpers import cli, runs_of, two_sides, write

DATA = Path(__file__).resolve().parents[1] / "data"

# parser -> (recorded output, regex whose group 1 is the number a user reads first, the metric it is)
HEADLINE = {
    "ab": ("nginx_n2000_c4", r"Requests per second:\s+([\d.]+)", "requests_per_s"),
    "wrk": ("nginx_404_t1_c4_d1s_latency", r"Requests/sec:\s+([\d.]+)", "requests_per_s"),
    "db_bench": ("fillrandom_readrandom_histogram_num10000", r":\s+([\d.]+) micros/op", "fillrandom_us_per_op"),
    "gnu-time": ("default_exit3", r"([\d.]+)user", "user_s"),
    "hackbench": ("pipe_g2_l100", r"Time: ([\d.]+)", "time_s"),
    "lmbench": ("bw_mem_rd_1m", r"^[\d.]+ ([\d.]+)", "bandwidth_mb_per_s"),
    "perf-bench": ("epoll_ctl", r"Averaged (\d+) ADD", "epoll_ctl_add_ops"),
    "pgbench": ("select_only_c2_t2s_latency", r"tps = ([\d.]+)", "tps"),
    "redis-benchmark": ("csv_pipeline16_ping_set", r'"PING_INLINE","([\d.]+)"', "ping_inline_requests_per_s"),
    "stress-ng": ("cpu_matrix_yaml", r"metrc: \[\d+\] cpu\s+(\d+)", "cpu_bogo_ops"),
    "sysbench": ("cpu_percentile95_histogram", r"total time:\s+([\d.]+)s", "total_time_s"),
    "will-it-scale": ("futex1_processes_t1_s1", r"average:(\d+)", "ops_per_s"),
}
DAMAGE = {"nan": "nan", "1e400": "1e400", "inf": "inf", "minus-inf": "-inf", "empty": "", "hex": "0x1F",
          "decimal-comma": "1,5"}
# Parsers whose line pattern no longer matches a damaged line leave that line's metrics out (the run's
# other metrics stand); every other parser refuses the output.
DROPS_THE_LINE = {"db_bench", "perf-bench", "redis-benchmark", "stress-ng"}


def recorded(parser: str) -> tuple[str, str]:
    stem = DATA / parser / HEADLINE[parser][0]
    err = stem.with_suffix(".stderr")
    return stem.with_suffix(".txt").read_text(), err.read_text() if err.exists() else ""


def damaged(text: str, pattern: str, value: str) -> str:
    def put(m: re.Match) -> str:
        return m.group(0)[: m.start(1) - m.start(0)] + value + m.group(0)[m.end(1) - m.start(0):]
    return re.sub(pattern, put, text, count=1, flags=re.M)


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("parser", list(HEADLINE))
def test_damaged_headline_is_refused_or_left_out_never_misread(parser, damage):
    """One parser, its recorded output, the headline number damaged: ParseError, or that metric absent."""
    _, pattern, metric = HEADLINE[parser]
    out, err = recorded(parser)
    parse = get_parser(parser, {})
    before = {k: m.value for k, m in parse(out, err).items()}
    bad_out, bad_err = damaged(out, pattern, DAMAGE[damage]), damaged(err, pattern, DAMAGE[damage])
    assert (bad_out, bad_err) != (out, err)
    strict = parser not in DROPS_THE_LINE or damage == "1e400"  # 1e400 still matches the digits pattern
    try:
        after = {k: m.value for k, m in parse(bad_out, bad_err).items()}
    except ParseError as e:
        message = str(e)
        assert "\n" not in message
        tool = {"gnu-time": "GNU time", "perf-bench": "perf bench"}.get(parser, parser)
        assert message.lower().startswith(tool.lower()), message
        return
    assert not strict, f"{parser} read damaged output {DAMAGE[damage]!r}: {after}"
    assert metric not in after
    assert all(before[k] == v for k, v in after.items())  # nothing else changed


def test_recorded_outputs_parse_as_recorded():
    """The undamaged outputs above parse, with each headline metric present (the cases above start from them)."""
    for parser, (_, _, metric) in HEADLINE.items():
        assert metric in get_parser(parser, {})(*recorded(parser)), parser


@pytest.mark.parametrize("printed, parser, options, reason", [
    ("ops: nan", "regex", '{patterns = {ops = "ops: (\\\\S+)"}}', r"regex for metric 'ops' captured 'nan', which is not a finite number: make the group capture only"),
    ("ops=1e400", "keyvalue", "{}", r"reads '1e400', which is not a finite number"),
    ("Requests per second:    0x1F [#/sec] (mean)", "ab", "{}", r"ab metric 'requests_per_s' reads '0x1F'"),
    ("hello", "hackbench", "{}", r"hackbench output has no 'Time: <seconds>' line"),
], ids=["regex-nan", "keyvalue-1e400", "ab-hex", "hackbench-wrong-tool"])
def test_unreadable_output_is_a_failed_run_with_the_parser_reason(tmp_path, printed, parser, options, reason):
    """A workload whose output its parser refuses: each run stored failed with the reason, no verdict printed."""
    workload = f'argv = ["printf", "%s\\\\n", "{printed}"]\nparser = "{parser}"\nparser_options = {options}'
    spec = write(tmp_path / "p.toml", two_sides(workload=workload, experiment="max_failures = 10"))
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db)
    stored = runs_of(db)
    assert stored and all(status == "failed" for _, _, _, status, _ in stored)
    assert all(re.search(reason, why) for *_, why in stored), stored
    assert out.code == 1 and "Traceback" not in out.err
    last = out.err.strip().splitlines()[-1]  # after one progress line per failed run
    assert last.startswith("perfab: no comparison for workload 'w': a side has no usable runs to compare"), last
    assert "No comparison: a side has no usable runs of this workload" in out.out and "**" not in out.out
