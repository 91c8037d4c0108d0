"""The metric catalogue: one ``resolve`` for every metric a run can carry, whoever produced it."""

from __future__ import annotations

from perfab.metrics import RUSAGE, resolve
from perfab.specfile import MetricSpec


def test_rusage_and_service_metrics_carry_their_labels_and_origins():
    wall = resolve("wall_s")
    assert (wall.label, wall.unit, wall.direction, wall.origin, wall.kind) == ("Time elapsed (s)", "s", "lower",
                                                                                 "rusage", "time")
    assert list(RUSAGE) == ["wall_s", "user_s", "sys_s", "max_rss_kb", "vcsw", "ivcsw"]  # the report's order
    reads = resolve("service_reads_per_req")
    assert reads.exact and reads.origin == "service" and reads.label == "Server reads/req"


def test_perf_events_with_filters_and_derived_ratios():
    assert resolve("task-clock").unit == "msec" and resolve("user_time:u").unit == "ns"
    assert resolve("L1-icache-load-misses:k").direction == "lower" and resolve("instructions").direction is None
    assert not resolve("cycles:u").exact and resolve("cycles:u").kind == "count"
    assert resolve("IPC :k").higher_is_better is True and resolve("L1i MPKI :u").higher_is_better is False
    assert resolve("branch miss ratio").unit == ""


def test_simulated_counts_are_exact_and_split_counts_keep_their_name():
    assert resolve("instructions", simulated=True).exact and not resolve("instructions").exact
    split = resolve("I1 misses:k", simulated=True)
    assert (split.name, split.unit, split.direction, split.exact) == ("I1 misses:k", "count", "lower", True)
    assert resolve("I1 MPKI", simulated=True).unit == "misses/kinstr" and resolve("I1 MPKI").unit == ""
    assert resolve("D1 refs", simulated=True).direction is None


def test_machine_rows_and_service_counters():
    assert resolve("interrupts.TLB").direction == "lower" and resolve("interrupts.NMI").direction is None
    assert resolve("interrupts.TLB").origin == "machine" and resolve("vmstat.pgfault").direction is None
    served = resolve("service.cycles:k")
    assert (served.name, served.direction, served.origin) == ("service.cycles:k", "lower", "service")


def _declared(**given) -> MetricSpec:
    """A metric declaration with the fields a spec leaves out at their neutral values."""
    neutral = dict(unit=None, higher_is_better=None, margin_pct=None, primary=False, check=None, method=None,
                   label=None, no_direction=False)
    return MetricSpec(**{**neutral, **given})


def test_what_a_producer_reports_then_what_the_spec_declares_wins():
    parsed = resolve("latency_ms", unit="ms", higher_is_better=False, origin="parser")
    assert (parsed.unit, parsed.direction, parsed.kind, parsed.origin) == ("ms", "lower", "time", "parser")
    rate = resolve("ops", unit="ops/s", higher_is_better=True)
    declared = resolve("ops", known=rate, declared=_declared(name="ops", label="throughput", unit="req/s"))
    assert (declared.label, declared.unit, declared.direction, declared.kind) == ("throughput", "req/s", "higher",
                                                                                   "rate")
    flat = resolve("ops", known=rate, declared=_declared(name="ops", no_direction=True))
    assert flat.direction is None and flat.label == "ops"
    assert resolve("wall_s", declared=_declared(name="wall_s", higher_is_better=True)).direction == "higher"
    unknown = resolve("wall_s", unit=None, higher_is_better=None, exact=False, origin="backend")
    assert unknown.label == "Time elapsed (s)" and unknown.direction is None and unknown.unit is None
