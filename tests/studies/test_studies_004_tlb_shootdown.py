"""Study 004: mmap/touch/munmap at 1 and all CPUs, processes against threads (timed, interrupts counted)."""

from __future__ import annotations

import os

from studies_helpers import LoadMeter, judged_on_quiet_machine, require_cpus, run_study, spec, verdict

SPEC = spec("004-tlb-shootdown", "sweep.toml")


def test_threads_sharing_an_mm_fall_behind_and_take_shootdown_ipis(tmp_path):
    require_cpus(2)
    meter = LoadMeter().start()
    doc = run_study(SPEC, tmp_path)
    all_cpus = str(os.sysconf("SC_NPROCESSORS_ONLN"))  # what "100%" resolves to
    rows = {(r["metric"], r["params"]["threads"]): r for r in doc["rows"] if r["variant"] == "threads"}
    curve = {s["params"]["threads"]: s for s in doc["summaries"]
             if s["metric"] == "ops/s" and s["variant"] == "threads"}
    assert set(curve) == {"1", all_cpus}
    one, full = curve["1"], curve[all_cpus]
    assert full["n"] == one["n"] == 8

    def check():
        # Per-thread rate falls with threads: the whole interval of the median at
        # all CPUs, per thread, lies below the interval at one thread.
        assert full["hi"] / int(all_cpus) < one["lo"], (
            f"per-thread ops/s at {all_cpus} threads up to {full['hi'] / int(all_cpus):,.0f}, "
            f"at 1 thread from {one['lo']:,.0f}")
        ops, tlb, cal = (rows[(m, all_cpus)] for m in ("ops/s", "interrupts.TLB", "interrupts.CAL"))
        assert ops["verdict"] == "**" and ops["delta"] < 0, verdict(ops)
        assert tlb["verdict"] == "**" and tlb["median_exp"] > tlb["median_base"], verdict(tlb)
        assert cal["verdict"] == "**" and cal["median_exp"] > cal["median_base"], verdict(cal)

    judged_on_quiet_machine(meter.stop(), check)
