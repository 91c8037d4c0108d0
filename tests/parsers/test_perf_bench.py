"""perf-bench parser against recorded perf 6.1 runs (tests/data/perf-bench/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("perf-bench")


def test_sched_pipe(recorded):
    m = parse(*recorded("perf-bench", "sched_pipe"))
    assert m == {
        "sched_pipe_total_s": ParsedMetric(0.767, "s", False),
        "sched_pipe_us_per_op": ParsedMetric(38.3697, "us", False),
        "sched_pipe_ops_per_s": ParsedMetric(26062.0, "ops/s", True),
    }


@pytest.mark.parametrize("name, value", [("sched_messaging", 0.055), ("sched_messaging_threads", 0.039)])
def test_sched_messaging(recorded, name, value):
    assert parse(*recorded("perf-bench", name)) == {"sched_messaging_total_s": ParsedMetric(value, "s", False)}


def test_syscall_basic(recorded):
    m = parse(*recorded("perf-bench", "syscall_basic"))
    assert m["syscall_basic_ops_per_s"].value == 7587541.0
    assert m["syscall_basic_us_per_op"].value == 0.131795


@pytest.mark.parametrize("name, prefix, ops, rsd", [
    ("futex_hash", "futex_hash", 3404800.0, 0.36),
    ("futex_lock_pi", "futex_lock_pi", 4038.0, 0.0),
    ("epoll_wait", "epoll_wait", 34810.0, 45.53),
])
def test_averaged_operations_per_sec(recorded, name, prefix, ops, rsd):
    m = parse(*recorded("perf-bench", name))
    assert m[f"{prefix}_ops_per_s"] == ParsedMetric(ops, "ops/s", True)
    assert m[f"{prefix}_rsd_pct"] == ParsedMetric(rsd, "%", None)


def test_epoll_ctl(recorded):
    m = parse(*recorded("perf-bench", "epoll_ctl"))
    assert {k: v.value for k, v in m.items()} == {
        "epoll_ctl_add_ops": 44930.0, "epoll_ctl_mod_ops": 44930.0, "epoll_ctl_del_ops": 44930.0,
    }


@pytest.mark.parametrize("name, ms, rsd", [
    ("futex_wake", 0.2003, 31.43), ("futex_requeue", 0.0117, 42.28), ("futex_wake_parallel", 0.0590, 26.13),
])
def test_futex_wake_family_reads_the_summary_not_a_run(recorded, name, ms, rsd):
    m = parse(*recorded("perf-bench", name))
    assert m[f"{name}_ms"] == ParsedMetric(ms, "ms", False)
    assert m[f"{name}_rsd_pct"].value == rsd


def test_mem_memcpy_every_function(recorded):
    m = parse(*recorded("perf-bench", "mem_memcpy"))
    assert {k: v.value for k, v in m.items()} == {
        "mem_memcpy_default_gb_per_s": 45.891095,
        "mem_memcpy_x86_64_unrolled_gb_per_s": 39.250904,
        "mem_memcpy_x86_64_movsq_gb_per_s": 51.779560,
        "mem_memcpy_x86_64_movsb_gb_per_s": 48.153969,
    }
    assert m["mem_memcpy_default_gb_per_s"].unit == "GiB/s"


def test_mem_memset_and_single_function(recorded):
    assert parse(*recorded("perf-bench", "mem_memset"))["mem_memset_x86_64_stosb_gb_per_s"].value == 127.488577
    assert list(parse(*recorded("perf-bench", "mem_memcpy_default"))) == ["mem_memcpy_default_gb_per_s"]


def test_mem_small_rate_converted_to_gib():
    text = ("# Running 'mem/memcpy' benchmark:\n# function 'default' (glibc)\n# Copying 1KB bytes ...\n\n"
            "    512.000000 MB/sec\n")
    assert parse(text, "")["mem_memcpy_default_gb_per_s"].value == 0.5


def test_simple_format_is_refused(recorded):
    with pytest.raises(ParseError, match="run without '-f simple'"):
        parse(*recorded("perf-bench", "sched_pipe_simple"))


def test_unsupported_benchmark_names_what_is_supported():
    with pytest.raises(ParseError, match="perf bench numa/mem printed no result"):
        parse("# Running 'numa/mem' benchmark:\n\n ###\n", "")
