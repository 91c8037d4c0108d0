"""The out-file parser on recorded cachegrind and callgrind files (see tests/data/cachegrind/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfab.errors import ToolError
from perfab.run.backends.cache_outfile import HEAD_BYTES, metrics_from_events, parse_out_file, sum_out_files

DATA = Path(__file__).resolve().parents[1] / "data" / "cachegrind"
CG = DATA / "lockbench512_inline_2000.cachegrind.out"
CL = DATA / "lockbench512_inline_2000_site1.callgrind.out"


def log_totals(log: Path) -> dict[str, int]:
    """Valgrind's own end-of-run totals ("I   refs:  276,039", ...) from its log."""
    totals = {}
    labels = (("I   refs", "Ir"), ("I1  misses", "I1"), ("D   refs", "D"), ("D1  misses", "D1"), ("LL misses", "LL"))
    for label, key in labels:
        m = re.search(rf"{re.escape(label)}:\s+([\d,]+)", log.read_text())
        totals[key] = int(m.group(1).replace(",", ""))
    return totals


def test_cachegrind_file_is_larger_than_the_head_read():
    assert CG.stat().st_size > HEAD_BYTES  # the summary line must come from the tail


@pytest.mark.parametrize("path", [CG, CL], ids=["cachegrind", "callgrind"])
def test_metrics_match_valgrind_log(path):
    out = parse_out_file(path)
    log = log_totals(path.with_suffix(".log"))
    metrics = metrics_from_events(out.events)
    assert metrics["instructions"] == log["Ir"]
    assert metrics["I1 misses"] == log["I1"]
    assert metrics["D1 misses"] == log["D1"]
    assert metrics["LL misses"] == log["LL"]
    assert metrics["D1 refs"] == log["D"]
    assert metrics["I1 MPKI"] == pytest.approx(1000 * log["I1"] / log["Ir"])


def test_cachegrind_events_and_header():
    out = parse_out_file(CG)
    assert out.events == {
        "Ir": 276039, "I1mr": 7615, "ILmr": 3359, "Dr": 60012, "D1mr": 1447,
        "DLmr": 1240, "Dw": 17685, "D1mw": 445, "DLmw": 414,
    }
    assert out.caches == {"I1": (32768, 8, 64), "D1": (49152, 12, 64), "LL": (33554432, 16, 64)}
    assert out.cmd == "./inline 2000"


def test_callgrind_omitted_trailing_zeros_are_zero():
    out = parse_out_file(CL)
    assert list(out.events) == ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]
    assert out.events["Ir"] == 20102 and out.events["ILmr"] == 432
    assert out.events["DLmr"] == 0 and out.events["DLmw"] == 0
    assert out.caches["LL"] == (33554432, 16, 64)


def test_truncated_file_is_a_tool_error(tmp_path):
    cut = tmp_path / "cachegrind.out"
    cut.write_bytes(CG.read_bytes()[:5000])  # killed mid-write: no summary line
    with pytest.raises(ToolError, match="no summary:/totals: line"):
        parse_out_file(cut)


def test_not_an_out_file(tmp_path):
    other = tmp_path / "cachegrind.out"
    other.write_text("hello\n")
    with pytest.raises(ToolError, match="no events: line"):
        parse_out_file(other)


def test_missing_file_is_a_tool_error(tmp_path):
    with pytest.raises(ToolError, match="cannot read"):
        parse_out_file(tmp_path / "absent.out")


def test_sum_over_processes():
    total = sum_out_files([parse_out_file(CG), parse_out_file(CL)])
    assert total["Ir"] == 276039 + 20102
    assert total["DLmw"] == 414


def test_mpki_absent_without_instructions():
    metrics = metrics_from_events({"Ir": 0, "I1mr": 0, "Dr": 0, "Dw": 0})
    assert "I1 MPKI" not in metrics and metrics["instructions"] == 0
