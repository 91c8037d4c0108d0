"""lmbench parser. Written from github.com/intel/lmbench; fixtures are real output of that
source built outside the repository (tests/data/lmbench/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("lmbench")


@pytest.mark.parametrize("fixture, name, value", [
    ("lat_proc_fork", "process_fork_exit_us", 169.8121),
    ("lat_proc_exec", "process_fork_execve_us", 2417.2),
    ("lat_syscall_null", "simple_syscall_us", 0.1407),
    ("lat_syscall_read", "simple_read_us", 0.2200),
    ("lat_pipe", "pipe_latency_us", 12.1508),
    ("lat_sig_install", "signal_handler_installation_us", 0.2256),
    ("lat_unix", "af_unix_sock_stream_latency_us", 17.7478),
])
def test_latency_lines(recorded, fixture, name, value):
    assert parse(*recorded("lmbench", fixture)) == {name: ParsedMetric(value, "us", False)}


def test_bandwidth_lines(recorded):
    assert parse(*recorded("lmbench", "bw_pipe")) == {"pipe_bandwidth_mb_per_s": ParsedMetric(3412.70, "MB/s", True)}
    assert parse(*recorded("lmbench", "bw_mem_rd_1m")) == {"bandwidth_mb_per_s": ParsedMetric(53903.10, "MB/s", True)}


def test_lat_ctx_block(recorded):
    assert parse(*recorded("lmbench", "lat_ctx_s0_2")) == {
        "ctx_0k_2procs_us": ParsedMetric(1.72, "us", False),
        "ctx_0k_4procs_us": ParsedMetric(3.56, "us", False),
    }


def test_the_example_from_the_lmbench_docs():
    m = parse("", "Process fork+exit: 270.0952 microseconds\nPagefaults on /tmp/x: 0.35 nanoseconds\n")
    assert m["process_fork_exit_us"].value == 270.0952
    assert m["pagefaults_on_tmp_x_ns"] == ParsedMetric(0.35, "ns", False)


def test_unixbench_output_is_not_lmbench(recorded):
    with pytest.raises(ParseError, match="lmbench output has no"):
        parse(*recorded("unixbench", "pgms_syscall_2"))
