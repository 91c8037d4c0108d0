"""The guest backend's branch and coherence models: spec keys, plugin options, metrics and profile rows.

The readings come from a real launcher result recorded with both models on
(tests/data/guest-models, its command in NOTE.md there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfab.errors import SpecError
from perfab.metrics import resolve
from perfab.run.backends.guest import GuestBackend, read_result
from perfab.specfile import parse_spec

RESULT = Path(__file__).resolve().parents[1] / "data" / "guest-models" / "result.json"


def _spec(measure: str) -> str:
    sides = "".join(f'[[variant]]\nname = "{n}"\n[variant.kernel]\nimage = "/boot/vmlinuz-x"\n' for n in "ab")
    return f'[experiment]\nname = "k"\n{sides}[[workload]]\nname = "w"\nargv = ["/bin/true"]\n[measure]\n{measure}\n'


def _backend(measure: str) -> GuestBackend:
    backend = GuestBackend(parse_spec(_spec(measure=measure)).measure)
    backend.accel = "tcg"
    return backend


def test_branch_sim_and_coherence_ask_the_plugin_for_its_models():
    backend = _backend('backend = "guest"\nvcpus = 2\nbranch_sim = true\ncoherence = true')
    assert backend.plugin_options() == {"cache": False, "l1d": "32768:8:64", "branch": True, "coherence": True}
    cached = _backend('backend = "guest"\ncache_sim = true\nl1d = "16K,4,64"\ncoherence = true').plugin_options()
    assert cached["l1d"] == "16384:4:64" and cached["coherence"] and not cached["branch"]
    assert _backend('backend = "guest"').plugin_options() == {"cache": False, "l1d": "32768:8:64",
                                                               "branch": False, "coherence": False}
    backend.accel = "kvm"
    assert backend.plugin_options() is None


@pytest.mark.parametrize("measure, words", [
    ('backend = "perf"\ncounters = ["task-clock"]\ncoherence = true', "is read by the guest backend"),
    ('backend = "perf"\ncounters = ["task-clock"]\nbranch_sim = true', "cachegrind backend (or guest)"),
])
def test_the_model_keys_belong_to_their_backends(measure, words):
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(measure=measure), "k.toml")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_model_rows_are_exact_simulated_counts():
    info = _backend('backend = "guest"\nbranch_sim = true\ncoherence = true').metric_info()
    for name in ("branches:u", "branch mispredicts:k", "indirect branches:k", "indirect mispredicts:u",
                 "HITM:k", "HITM:u", "invalidations:k", "invalidations:u"):
        assert info[name].exact and info[name].unit == "count" and info[name].direction == "lower", name
    assert "branches:u" not in _backend('backend = "guest"').metric_info()
    assert resolve("HITM:k", simulated=True).label == "HITM:k"


def test_a_recorded_result_reads_as_branch_and_coherence_rows():
    counts = json.loads(RESULT.read_text())["counts"]
    m = read_result(RESULT).metrics
    assert m["branches:u"] == counts["bc_user"] + counts["bi_user"]
    assert m["branch mispredicts:k"] == counts["bcm_kernel"] + counts["bim_kernel"]
    assert m["indirect branches:u"] == counts["bi_user"] and m["indirect mispredicts:k"] == counts["bim_kernel"]
    assert m["HITM:k"] == counts["hitm_kernel"] > 0 and m["invalidations:u"] == counts["invalidations_user"]
    assert m["instructions:k"] == counts["insns_kernel"]


def test_profile_rows_are_shares_of_mispredictions_and_of_hitm_by_symbol_and_line():
    body = json.loads(RESULT.read_text())
    profile = read_result(RESULT).profile
    name, _, bcm, _, bim = body["symbols"]["by_branch_misses"][0]
    misses = body["counts"]["bcm_kernel"] + body["counts"]["bim_kernel"]
    assert profile[f"branch-miss% [k] {name}"] == pytest.approx(100 * (bcm + bim) / misses)
    name, hitm, _ = body["symbols"]["by_hitm"][0]
    assert profile[f"HITM% [k] {name}"] == pytest.approx(100 * hitm / body["counts"]["hitm_kernel"])
    lines = [key for key in profile if key.startswith("HITM% line ")]
    assert len(lines) == sum(1 for d in body["hitm_lines"] if d["hitm"])
    # kernel data is named by the guest's kallsyms (jiffies_64 is written by the tick on both vCPUs)
    assert "HITM% line jiffies_64+0x0" in profile
    assert any(key.startswith("HITM% line 0xffff888") for key in lines)  # slab and page memory stay addresses
    assert all(0 < v <= 100 for v in profile.values())
