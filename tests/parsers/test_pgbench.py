"""pgbench parser against recorded PostgreSQL 15 runs (tests/data/pgbench/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("pgbench")


def test_tpcb_duration_run(recorded):
    m = parse(*recorded("pgbench", "tpcb_c2_t3s"))
    assert m == {
        "tps": ParsedMetric(299.006581, "tx/s", True),
        "latency_avg_ms": ParsedMetric(6.689, "ms", False),
        "initial_connection_ms": ParsedMetric(77.409, "ms", False),
        "transactions": ParsedMetric(875.0, "count", None),
        "failed_transactions": ParsedMetric(0.0, "count", False),
    }


def test_select_only_over_unix_socket(recorded):
    m = parse(*recorded("pgbench", "select_only_c2_t2s_latency"))
    assert m["tps"].value == 25735.328151 and m["transactions"].value == 47261.0


def test_transaction_count_run_has_stddev(recorded):
    m = parse(*recorded("pgbench", "tpcb_t500_progress"))
    assert m["latency_stddev_ms"] == ParsedMetric(1.653, "ms", False)
    assert m["transactions"].value == 500.0 and m["tps"].value == 542.650719


def test_pre_14_tps_lines():
    # Constructed from the PostgreSQL 13 pgbench report format.
    text = ("tps = 512.1 (including connections establishing)\n"
            "tps = 530.4 (excluding connections establishing)\n")
    m = parse(text, "")
    assert m["tps"].value == 530.4 and m["tps_including_connections"].value == 512.1


def test_init_only_output_has_no_tps():
    with pytest.raises(ParseError, match="pgbench output has no 'tps = ...' line"):
        parse("", "dropping old tables...\ncreating tables...\ndone in 0.45 s\n")
