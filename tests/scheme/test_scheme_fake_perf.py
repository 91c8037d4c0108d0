"""The fake perf's output keeps the layout of real perf 6.1 ``-j`` output recorded on this VM."""

from __future__ import annotations

import json
from pathlib import Path

from perfab.run.backends.perfparse import parse_json
from scheme_perf import HEADER, Fault, FakePerf, Level

DATA = Path(__file__).parent.parent / "data" / "perf"
EVENTS = "cycles,instructions,L1-icache-load-misses:u,user_time,system_time"


def _fake_output(tmp_path: Path, fault: Fault | None = None) -> str:
    levels = {"a": {"cycles": Level(4e9), "instructions": Level(8e9), "L1-icache-load-misses:u": Level(6e8),
                    "wall_s": Level(2.0), "ops/s": Level(1000.0)}}
    perf = FakePerf(levels, faults={0: fault} if fault else None)
    out = tmp_path / "perf.stat"
    outcome = perf(["perf", "stat", "-j", "-o", str(out), "-e", EVENTS, "--", "./build/a/bench"], {})
    assert outcome.stdout == b"ops/s: 1000\n" and outcome.wall_s == 2.0
    return out.read_text()


def test_same_header_keys_and_key_order_as_the_recorded_file(tmp_path):
    real = (DATA / "vm_group_u.json").read_text()
    fake = _fake_output(tmp_path)
    assert fake.startswith(HEADER) and real.startswith("# started on ") and real.splitlines()[1] == ""
    real_keys = {tuple(json.loads(line)) for line in real.splitlines()[2:]}
    fake_keys = {tuple(json.loads(line)) for line in fake.splitlines()[2:]}
    assert fake_keys == real_keys and len(real_keys) == 1
    real_row = next(line for line in real.splitlines() if '"user_time"' in line)
    fake_row = next(line for line in fake.splitlines() if '"user_time"' in line)
    assert real_row.split('"counter-value" : ')[0] == fake_row.split('"counter-value" : ')[0] == "{"
    assert [r.event for r in parse_json(fake).counters()] == [
        "cycles", "instructions", "L1-icache-load-misses", "user_time", "system_time"]  # :u dropped, as perf 6.1


def test_multiplexed_and_not_counted_rows(tmp_path):
    fake = _fake_output(tmp_path, Fault(multiplexed={"cycles": 67.0}, not_counted=("instructions",)))
    cycles, insns = parse_json(fake).counters()[:2]
    assert cycles.pct_running == 67.0 and cycles.value == 4e9 * 100 / 67 and cycles.run_time_ns == 1_340_000_000
    assert insns.status == "not counted" and insns.value is None and insns.run_time_ns == 0
