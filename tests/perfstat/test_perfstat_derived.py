"""Derived metrics from raw counts (seed 000's nginx and rocksdb numbers)."""

from __future__ import annotations

import pytest

from perfab.run.backends.perfderived import derived_metrics, derived_names


def test_ipc_cpi_from_raw_counts_seed_000_rocksdb():
    out = derived_metrics({"cycles": 4_681_002_302, "instructions": 9_574_476_543})
    assert out["IPC"] == pytest.approx(9_574_476_543 / 4_681_002_302)
    assert round(out["IPC"], 3) == 2.045  # the seed's table
    assert out["CPI"] == pytest.approx(4_681_002_302 / 9_574_476_543)


def test_mpki_falls_back_to_all_domain_instructions():
    # seed 000 nginx baseline: 0.41G kernel L1i misses, 5.86G instructions -> ~70 MPKI :k
    out = derived_metrics({"instructions": 5.86e9, "L1-icache-load-misses:k": 0.41e9})
    assert out == {"L1i MPKI :k": pytest.approx(1000 * 0.41e9 / 5.86e9)}
    assert 69 < out["L1i MPKI :k"] < 71


def test_mpki_prefers_same_domain_instructions():
    out = derived_metrics({"instructions": 2000.0, "instructions:k": 500.0, "L1-icache-load-misses:k": 10.0})
    assert out["L1i MPKI :k"] == 20.0
    assert "IPC :k" not in out  # cycles:k absent


def test_miss_ratios_need_the_same_filter():
    out = derived_metrics({"L1-icache-loads:u": 400.0, "L1-icache-load-misses:u": 4.0,
                           "L1-icache-load-misses:k": 9.0, "branches": 100.0, "branch-misses": 5.0})  # fmt: skip
    assert out["L1i miss ratio :u"] == 0.01
    assert "L1i miss ratio :k" not in out
    assert out["branch miss ratio"] == 0.05


def test_zero_or_missing_denominators_are_left_out():
    assert derived_metrics({"cycles": 0.0, "instructions": 10.0}) == {"CPI": 0.0}
    assert derived_metrics({"L1-icache-load-misses": 3.0}) == {}


def test_pooled_ipc_is_a_ratio_of_means_not_a_mean_of_ratios():
    runs = [{"cycles": 100.0, "instructions": 300.0}, {"cycles": 300.0, "instructions": 300.0}]
    pooled = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
    assert derived_metrics(pooled)["IPC"] == 1.5
    assert sum(derived_metrics(r)["IPC"] for r in runs) / 2 == 2.0


def test_derived_names_per_group():
    groups = (("cycles", "instructions", "L1-icache-load-misses:u"),
              ("cycles", "instructions", "L1-icache-load-misses:k"))
    assert derived_names(groups) == ["IPC", "CPI", "L1i MPKI :u", "L1i MPKI :k"]
