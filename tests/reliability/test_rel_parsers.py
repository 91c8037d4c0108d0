"""Damaged tool output: a parser refuses it with its one-line ParseError, or leaves the damaged value out.

For each parser, a real recorded output (``tests/data/<tool>/``, the command
that produced it beside it) has its headline number replaced by a damaged
one.  What is owed is never a wrong number: either the parser's ParseError
naming the tool, or the other metrics exactly as before with the damaged
one absent.  Every parser ``known_parsers()`` lists also meets output with
nothing to read (empty, blank, binary garbage decoded as the runner decodes
it) and a recorded run cut in half; then named damage to one other number,
field or unit.  The perf stat reader keeps rows perf can print (``<not
counted>``) and refuses counts no run can have (``1e400``).  End to end, a
run whose output cannot be read is stored as failed with that reason and
never reaches a verdict.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser, known_parsers
from perfab.run.backends.perfparse import PerfStatParseError, parse_csv, parse_json
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
DROPS_THE_LINE = {"perf-bench", "redis-benchmark", "stress-ng"}


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
    ("ops: nan", "regex", '{patterns = {ops = "ops: (\\\\S+)"}}',
     r"regex for metric 'ops' captured 'nan', which is not a finite number: make the group capture only"),
    ("ops=1e400", "keyvalue", "{}", r"reads '1e400', which is not a finite number"),
    ("Requests per second:    0x1F [#/sec] (mean)", "ab", "{}", r"ab metric 'requests_per_s' reads '0x1F'"),
    ("hello", "hackbench", "{}", r"hackbench output has no 'Time: <seconds>' line"),
], ids=["regex-nan", "keyvalue-1e400", "ab-hex", "hackbench-wrong-tool"])
def test_unreadable_output_is_a_failed_run_with_the_parser_reason(tmp_path, printed, parser, options, reason):
    """A workload whose output its parser refuses: each run stored failed with the reason, no verdict printed,
    and no non-finite number anywhere in the report."""
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
    shown = re.sub(r"'[^'\n]*'", "''", "\n".join(line for line in out.out.splitlines() if "printf" not in line))
    assert not re.search(r"\b(nan|inf|infinity)\b", shown, re.IGNORECASE), out.out  # values only quoted in reasons


# --- every registered parser, the perf stat reader ---

# parser -> (options, recorded run as directory/stem)
PARSERS = {
    "ab": ({}, "ab/nginx_n2000_c4"),
    "wrk": ({}, "wrk/nginx_t2_c8_d2s"),
    "db_bench": ({}, "db_bench/fillrandom_readrandom_histogram_num10000"),
    "perf-bench": ({}, "perf-bench/sched_pipe"),
    "hackbench": ({}, "hackbench/pipe_g2_l100"),
    "sysbench": ({}, "sysbench/memory_1s"),
    "stress-ng": ({}, "stress-ng/cpu_metrics_brief"),
    "redis-benchmark": ({}, "redis-benchmark/csv_set_get_n10000"),
    "pgbench": ({}, "pgbench/tpcb_c2_t3s"),
    "gnu-time": ({}, "gnu-time/verbose_dd_sleep"),
    "lmbench": ({}, "lmbench/lat_syscall_null"),
    "unixbench": ({}, "unixbench/run_i1_c1_syscall_pipe_spawn"),
    "will-it-scale": ({}, "will-it-scale/runtest_getppid1"),
    "keyvalue": ({"only": ["ops/s"]}, "keyvalue/lockbench_inline_256sites"),
    "regex": ({"patterns": {"tps": r"^tps = (\S+) \(without"}}, "pgbench/tpcb_c2_t3s"),
}
# how each tool is named in its messages
TOOL = {"gnu-time": "GNU time", "perf-bench": "perf bench", "unixbench": "UnixBench"}

GARBAGE = (b"\x7fELF\x02\x01\x01\x00" + bytes(range(0x80, 0x100))
           + b"\x00\r\n\x1b[31m\xff\xfe\n").decode(errors="replace")
NOTHING = {"empty": "", "blank": " \n\t\r\n  \n", "binary-garbage": GARBAGE}

# what each parser says when the output holds nothing it reads
NO_OUTPUT = {
    "ab": r"ab output has no 'Requests per second' line: is the workload really ab\?",
    "wrk": r"wrk output has no 'Requests/sec' line: is the workload really wrk\?",
    "db_bench": r"db_bench output has no '<benchmark> : \.\.\. micros/op \.\.\. ops/sec' line",
    "perf-bench": (r"perf bench output has no \"# Running '<subsystem>/<bench>' benchmark:\" line: "
                   r".*without '-f simple'"),
    "hackbench": r"hackbench output has no 'Time: <seconds>' line",
    "sysbench": r"sysbench output has no 'total time:' line",
    "stress-ng": (r"stress-ng output has no 'stress-ng: metrc:' stressor line "
                  r"\(run it with --metrics or --metrics-brief\)"),
    "redis-benchmark": (r"redis-benchmark output has no CSV row \(\"test\",\"rps\",\.\.\.\) "
                        r"or 'requests per second' line"),
    "pgbench": r"pgbench output has no 'tps = \.\.\.' line",
    "gnu-time": r"GNU time output has no report on stderr .*: is the workload wrapped in /usr/bin/time\?",
    "lmbench": r"lmbench output has no '<label>: <value> microseconds' or bandwidth line",
    "unixbench": r"UnixBench output has no 'COUNT\|n\|timebase\|unit' line",
    "will-it-scale": r"will-it-scale output has no 'average:' line \(was the test run with -s N\?\)",
    "keyvalue": r"output has no 'ops/s' line \(keyvalue found none\)",
    "regex": r"regex for metric 'tps' matched nothing in the output: check the pattern",
}

# the recorded run cut in half: refused (regex), or read in part (how many metrics, each as when whole)
CUT = {
    "ab": 5,
    "wrk": NO_OUTPUT["wrk"],
    "db_bench": 9,
    "perf-bench": r"perf bench sched/pipe printed no result perfab can read",
    "hackbench": NO_OUTPUT["hackbench"],
    "sysbench": NO_OUTPUT["sysbench"],
    "stress-ng": NO_OUTPUT["stress-ng"],
    "redis-benchmark": r"redis-benchmark CSV row '\"GET\",\"51' ends inside a field: the output was cut short",
    "pgbench": NO_OUTPUT["pgbench"],
    "gnu-time": 4,
    "lmbench": NO_OUTPUT["lmbench"],
    "unixbench": NO_OUTPUT["unixbench"],
    "will-it-scale": r"will-it-scale output has no runtest\.py CSV row after its header",
    "keyvalue": r"output has no 'ops/s' line \(keyvalue found checksum\)",
    "regex": NO_OUTPUT["regex"],
}


def recorded_run(run: str) -> tuple[str, str]:
    """(stdout, stderr) of ``tests/data/<run>`` (.txt or .csv, and .stderr), as the runner decodes them."""
    stem = DATA / run
    out = next((p for p in (stem.with_suffix(".txt"), stem.with_suffix(".csv")) if p.exists()), None)
    err = stem.with_suffix(".stderr")
    return (out.read_bytes().decode(errors="replace") if out else "",
            err.read_bytes().decode(errors="replace") if err.exists() else "")


def parse(parser: str, stdout: str, stderr: str, options: dict | None = None) -> dict[str, ParsedMetric]:
    return get_parser(parser, PARSERS[parser][0] if options is None else options)(stdout, stderr)


def refused(parser: str, stdout: str, stderr: str, pattern: str, options: dict | None = None) -> str:
    """Assert the parser raises its ParseError, one line naming the tool and matching ``pattern``."""
    with pytest.raises(ParseError) as caught:
        parse(parser, stdout, stderr, options)
    message = str(caught.value)
    assert type(caught.value) is ParseError and "\n" not in message, message
    assert TOOL.get(parser, parser) in message, message
    assert re.search(pattern, message), f"{pattern!r} not in {message!r}"
    return message


def values(metrics: dict[str, ParsedMetric]) -> dict[str, float]:
    """Metric -> value, each checked to be a finite float."""
    assert all(type(m.value) is float and math.isfinite(m.value) for m in metrics.values()), metrics
    return {name: m.value for name, m in metrics.items()}


def test_every_registered_parser_is_covered():
    """The tables above name every parser get_parser accepts, and each recorded run parses whole."""
    assert sorted(PARSERS) == known_parsers() == sorted(NO_OUTPUT) == sorted(CUT)
    for parser, (_, run) in PARSERS.items():
        assert values(parse(parser, *recorded_run(run))), parser


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_nothing_to_read(parser):
    """Empty, blank or binary-garbage output, on stdout or on stderr: the parser's own 'has no' line."""
    for text in NOTHING.values():
        refused(parser, text, "", NO_OUTPUT[parser])
        refused(parser, "", text, NO_OUTPUT[parser])


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_recorded_output_cut_in_half(parser):
    """The recorded run cut at half of each stream (a killed tool, a full disk): refused, or the
    metrics still there read exactly as in the whole output and the others absent."""
    stdout, stderr = recorded_run(PARSERS[parser][1])
    half = stdout[: len(stdout) // 2], stderr[: len(stderr) // 2]
    if isinstance(CUT[parser], str):
        refused(parser, *half, CUT[parser])
        return
    whole, part = values(parse(parser, stdout, stderr)), values(parse(parser, *half))
    assert len(part) == CUT[parser] and len(part) < len(whole)
    assert part == {name: whole[name] for name in part}


# damage the headline matrix above leaves out: another number, '-0', an empty field, an odd unit
# (id, parser, options or None for the table's, recorded run, text in it, its damaged form, outcome):
# outcome is a regex of the ParseError, or {metric: value} for what changed (None: left out), all else as recorded
ONE_DAMAGE = [
    ("wrk-latency-in-sec", "wrk", None, "wrk/nginx_t2_c8_d2s", "ms", "sec",
     r"wrk time has unknown unit 'sec': expected us, ms, s, m or h"),
    ("sysbench-minus-zero-duration", "sysbench", None, "sysbench/threads_t2_1s", "1.0004s", "-0s",
     {"total_time_s": 0.0, "events_per_s": None}),  # no rate from a zero duration
    ("pgbench-1e400-latency", "pgbench", None, "pgbench/tpcb_c2_t3s", "latency average = 6.689",
     "latency average = 1e400", r"pgbench metric 'latency_avg_ms' reads '1e400', which is not a finite number"),
    ("redis-benchmark-0.5x-rate", "redis-benchmark", None, "redis-benchmark/plain_q", "SET: 56497.18 requests",
     "SET: 0.5x requests", {"set_requests_per_s": None, "set_latency_p50_ms": None}),
    ("lmbench-minus-zero", "lmbench", None, "lmbench/lat_syscall_null", "0.1407", "-0", {"simple_syscall_us": 0.0}),
    ("unixbench-empty-fields", "unixbench", None, "unixbench/pgms_syscall_2", "COUNT|1590835|1|lps", "COUNT|||lps",
     NO_OUTPUT["unixbench"]),
    ("keyvalue-nan-required", "keyvalue", None, "keyvalue/lockbench_inline_256sites", "ops/s: 58974972", "ops/s: nan",
     r"output has no 'ops/s' line \(keyvalue found checksum\)"),
    ("keyvalue-minus-zero", "keyvalue", {}, "keyvalue/lockbench_inline_256sites", "ops/s: 58974972", "ops/s: -0",
     {"ops/s": 0.0}),
    ("regex-1e400", "regex", None, "pgbench/tpcb_c2_t3s", "tps = 299.006581", "tps = 1e400",
     r"regex for metric 'tps' captured '1e400', which is not a finite number: make the group capture only the number"),
]


@pytest.mark.parametrize("parser, options, run, old, new, outcome", [row[1:] for row in ONE_DAMAGE],
                         ids=[row[0] for row in ONE_DAMAGE])
def test_one_number_field_or_unit_damaged(parser, options, run, old, new, outcome):
    """One number, field or unit of a recorded run replaced: refused, or exactly the stated change."""
    stdout, stderr = recorded_run(run)
    assert old in stdout + stderr, old
    bad = (stdout.replace(old, new, 1), stderr) if old in stdout else (stdout, stderr.replace(old, new, 1))
    if isinstance(outcome, str):
        refused(parser, *bad, outcome, options)
        return
    whole, after = values(parse(parser, stdout, stderr, options)), values(parse(parser, *bad, options))
    expected = {**whole, **outcome}
    assert after == {name: v for name, v in expected.items() if v is not None}


ROW = "1.05,msec,task-clock,1050123,100.00,0.954,CPUs utilized"
JSON = '{"counter-value" : %s, "unit" : "msec", "event" : "task-clock", "event-runtime" : %s, "pcnt-running" : 100.00}'
# (id, reader, text, outcome): a regex of the PerfStatParseError,
# or (rows as (event, value, status, run time), messages)
PERF = [
    ("csv-count-1e400", parse_csv, ROW.replace("1.05", "1e400"), r"row whose count '1e400' is not a finite number"),
    ("csv-run-time-1e400", parse_csv, ROW.replace("1050123", "1e400"),
     r"row whose run time '1e400' is not a finite number"),
    ("csv-not-counted", parse_csv, "<not counted>,,cycles,0,0.00,,", ([("cycles", None, "not counted", 0)], ())),
    ("json-not-supported", parse_json, JSON % ('"<not supported>"', 0),
     ([("task-clock", None, "not supported", 0)], ())),
    ("csv-too-few-fields", parse_csv, "1.05,msec", ([], ("1.05,msec",))),
    ("csv-too-many-fields", parse_csv, ROW + ",extra,fields", ([("task-clock", 1.05, "ok", 1050123)], ())),
    ("json-counter-value-a-word", parse_json, JSON % ('"lots"', 1050123), ([], (JSON % ('"lots"', 1050123),))),
    ("json-counter-value-1e400-string", parse_json, JSON % ('"1e400"', 1050123),
     r"row whose counter-value '1e400' is not a finite number"),
    ("json-run-time-a-word", parse_json, JSON % ('"1.05"', '"soon"'), ([("task-clock", 1.05, "ok", None)], ())),
]


@pytest.mark.parametrize("read, text, outcome", [row[1:] for row in PERF], ids=[row[0] for row in PERF])
def test_perf_stat_reader(read, text, outcome):
    """One perf stat line: a count no run has is PerfStatParseError quoting the line; what perf prints
    (<not counted>, <not supported>) is a row without a value; a line that is no row is a message."""
    if isinstance(outcome, str):
        with pytest.raises(PerfStatParseError, match=outcome) as caught:
            read(text)
        assert "\n" not in str(caught.value) and text[:40] in str(caught.value)
        return
    got = read(text)
    assert [(r.event, r.value, r.status, r.run_time_ns) for r in got.rows] == outcome[0]
    assert got.messages == outcome[1]


def test_a_damaged_db_bench_line_never_lends_its_percentiles_to_the_one_before():
    """readrandom's result line damaged: refused, rather than its percentiles filed under fillrandom."""
    out, err = recorded("db_bench")
    bad = re.sub(r"^(readrandom\s*:\s*)[\d.]+", r"\1nan", out, count=1, flags=re.M)
    assert bad != out
    with pytest.raises(ParseError, match=r"^db_bench result line 'readrandom"):
        get_parser("db_bench", {})(bad, err)
