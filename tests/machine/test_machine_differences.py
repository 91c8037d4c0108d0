"""differences() between two snapshots."""

from __future__ import annotations

from perfab.machine import VOLATILE, differences

A = {
    "kernel.release": "6.1.0-18-amd64",
    "cpufreq.governor": "performance",
    "load.avg": "0.10 0.20 0.30",
    "tool.gcc": "gcc (Debian 12.2.0-14) 12.2.0",
}


def test_identical_snapshots_have_no_differences():
    assert differences(A, dict(A)) == []


def test_changed_values_are_reported_in_key_order():
    b = dict(A, **{"tool.gcc": "gcc (Debian 13.2.0-2) 13.2.0", "cpufreq.governor": "powersave"})
    assert differences(A, b) == [
        ("cpufreq.governor", "performance", "powersave"),
        ("tool.gcc", "gcc (Debian 12.2.0-14) 12.2.0", "gcc (Debian 13.2.0-2) 13.2.0"),
    ]


def test_volatile_keys_are_ignored_unless_asked_for():
    b = dict(A, **{"load.avg": "2.00 1.00 0.50"})
    assert "load.avg" in VOLATILE
    assert differences(A, b) == []
    assert differences(A, b, ignore=frozenset()) == [("load.avg", "0.10 0.20 0.30", "2.00 1.00 0.50")]


def test_hostname_is_not_volatile():
    assert differences({"host.name": "a"}, {"host.name": "b"}) == [("host.name", "a", "b")]


def test_a_key_on_one_side_only_shows_missing():
    b = dict(A, **{"mm.thp": "madvise"})
    del b["kernel.release"]
    assert differences(A, b) == [
        ("kernel.release", "6.1.0-18-amd64", "missing"),
        ("mm.thp", "missing", "madvise"),
    ]
