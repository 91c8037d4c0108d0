"""Counter groups: seed 000's split, budgets, software events, bad input."""

from __future__ import annotations

import pytest

from perfab.errors import UsageError
from perfab.run.backends.perfsched import schedule_groups, split_modifiers

SEED_000 = ["cycles", "instructions", "L1-icache-load-misses:u", "L1-icache-load-misses:k"]


def test_seed_000_counters_with_budget_3_give_one_group_per_filter():
    assert schedule_groups(SEED_000, 3) == (
        ("cycles", "instructions", "L1-icache-load-misses:u"),
        ("cycles", "instructions", "L1-icache-load-misses:k"),
    )


def test_split_variants_never_share_a_group_even_when_budget_allows():
    groups = schedule_groups(SEED_000, 8)
    assert len(groups) == 2
    assert all(not {"L1-icache-load-misses:u", "L1-icache-load-misses:k"} <= set(g) for g in groups)


def test_software_events_ride_everywhere_and_cost_nothing():
    counters = ["task-clock", "page-faults", *SEED_000, "user_time", "system_time", "context-switches"]
    groups = schedule_groups(counters, 3)
    assert len(groups) == 2
    for group in groups:
        assert {"task-clock", "page-faults", "user_time", "system_time", "context-switches"} <= set(group)
        assert len(group) == 8  # 5 software + 3 hardware


def test_domains_travel_together_and_chunks_respect_budget():
    counters = ["cycles", "instructions:u", "instructions:k", "L1-icache-load-misses:u",
                "L1-icache-load-misses:k", "iTLB-load-misses:u", "iTLB-load-misses:k"]  # fmt: skip
    assert schedule_groups(counters, 4) == (
        ("cycles", "instructions:u", "L1-icache-load-misses:u", "iTLB-load-misses:u"),
        ("cycles", "instructions:k", "L1-icache-load-misses:k", "iTLB-load-misses:k"),
    )
    groups = schedule_groups(counters, 3)
    assert len(groups) == 4 and all(len(g) <= 3 for g in groups)
    assert sorted(e for g in groups for e in g if e != "cycles") == sorted(counters[1:])


def test_tracepoints_cost_no_counter():
    counters = ["cycles", "syscalls:sys_enter_read", "L1-icache-load-misses:u", "L1-icache-load-misses:k"]
    assert schedule_groups(counters, 2) == (
        ("cycles", "syscalls:sys_enter_read", "L1-icache-load-misses:u"),
        ("cycles", "syscalls:sys_enter_read", "L1-icache-load-misses:k"),
    )


def test_no_split_gives_one_group():
    assert schedule_groups(["cycles", "instructions", "task-clock"], 2) == (("cycles", "instructions", "task-clock"),)


@pytest.mark.parametrize("budget", [1, 2])
def test_budget_below_common_events_names_the_fix(budget):
    with pytest.raises(UsageError, match="raise max_events_per_run or request fewer counters"):
        schedule_groups(SEED_000, budget)


@pytest.mark.parametrize(
    "counters, message",
    [
        (["cycles", "cycles"], "listed twice"),
        (["{cycles,instructions}"], "one event per entry"),
        (["cycles,instructions"], "one event per entry"),
        ([""], "empty"),
    ],
)
def test_bad_event_lists(counters, message):
    with pytest.raises(UsageError, match=message):
        schedule_groups(counters, 4)


def test_pmu_terms_with_commas_are_one_event_and_zero_budget_is_refused():
    assert schedule_groups(["cpu/event=0x3c,umask=0x0/u"], 1) == (("cpu/event=0x3c,umask=0x0/u",),)
    with pytest.raises(UsageError, match="at least 1"):
        schedule_groups(["cycles"], 0)


def test_split_modifiers():
    assert split_modifiers("L1-icache-load-misses:k") == ("L1-icache-load-misses", "k")
    assert split_modifiers("cycles") == ("cycles", "")
    assert split_modifiers("syscalls:sys_enter_read") == ("syscalls:sys_enter_read", "")
