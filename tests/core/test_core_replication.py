"""Boots as the unit of replication: the plan's places, the seeded draws, the store, and rows judged per boot.

A run restored from one boot repeats that boot, so the analysis must take the boot as its unit
(``perfab.replication``, ``perfab.analyse.units``).  These tests drive ``compare()`` with datasets
whose boots differ and whose runs within a boot repeat exactly (the pseudo-replication the issue
found), the runner and store with a backend that declares boots, and the spec's rules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from core_helpers import FIXED_ENV, cli, two_sides
from test_core_report_document import SCHEMA, _validate

from perfab.analyse.compare import compare
from perfab.analyse.diagnostics import Kind
from perfab.analyse.units import Levels, components, optimal_runs, unit_means
from perfab.errors import SpecError
from perfab.metrics import resolve
from perfab.plan import make_plan
from perfab.replication import BOOT, GUEST_PERTURBATIONS, RUN, Replication, boot_word, run_cost, stored
from perfab.report import render
from perfab.run.backends import TimeBackend
from perfab.run.executor import FakeExecutor, FakeOutcome
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Dataset, Store
from perfab.store.dataset import RunInfo, Session

SPEC = ('[experiment]\nname = "sim"\nruns = 18\nwarmup = 0\n\n[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n'
        '[[workload]]\nname = "w"\nargv = ["w"]\n\n[[workload.metric]]\nname = "k"\ndirection = "lower"\n')
META = {("w", "k"): resolve("k", unit=None, higher_is_better=False, exact=True, origin="backend")}


def booted(rng, boots: int, runs: int, effect: float = 0.0, between: float = 0.01, within: float = 0.0,
           replication: Replication | None = Replication(BOOT, 6, 7, GUEST_PERTURBATIONS),
           sources: dict | None = None) -> Dataset:
    """A two-side dataset whose run k goes on from boot k mod ``boots``: each boot one draw (``between``), the
    runs within it repeating it (``within`` = 0: exactly, as restored guests do)."""
    design = {"replication": replication.to_json()} if replication is not None else None
    session = Session(1, "sim", 0.0, "finished", None, SPEC, "sim.toml", "guest", ((),), {}, sources=sources or {},
                      design=design)
    means = {s: 1e6 * (1 + (effect if s == "b" else 0.0)) * (1 + rng.normal(0, between, boots)) for s in "ab"}
    runs_, values = [], {}
    for k in range(runs):
        for side in (("a", "b") if k % 2 == 0 else ("b", "a")):
            rid = len(runs_) + 1
            runs_.append(RunInfo(rid, 1, rid, 1, "w", side, (), 0, False, k // 2, float(rid), "ok", None, (), k))
            values[rid] = {"k": float(round(means[side][k % boots] * (1 + rng.normal(0, within))))}
    return Dataset("sim", (session,), tuple(runs_), values, {}, dict(META))


def test_the_plan_numbers_each_cells_measured_runs_and_its_warm_ups():
    exp = parse_spec(two_sides(runs=6, warmup=2), "s.toml")
    plan = make_plan(exp)
    for side in ("a", "b"):
        mine = [p for p in plan if p.variant == side]
        assert [p.rep for p in mine if p.warmup] == [-1, -2]
        assert [p.rep for p in mine if not p.warmup] == list(range(6))


def test_draws_are_the_same_on_every_side_seeded_and_spread_over_the_boots():
    r = Replication(BOOT, 3, 42, GUEST_PERTURBATIONS)
    draws = [r.draw("w", (), k) for k in range(6)]
    assert [d.boot for d in draws] == [0, 1, 2, 0, 1, 2]
    assert draws[0].word == draws[3].word != draws[1].word  # one word per boot, the boots apart
    assert re.fullmatch(r"perfab_boot=[a-z0-9]{1,64}", draws[0].word)
    assert len({d.run.entropy for d in draws}) == 6 and len(draws[0].run.entropy) == 64  # each run its own draw
    again = Replication(BOOT, 3, 42, GUEST_PERTURBATIONS).draw("w", (), 4)
    assert again == draws[4]  # the same seed makes the same perturbation
    assert Replication(BOOT, 3, 43, GUEST_PERTURBATIONS).draw("w", (), 4) != draws[4]
    assert {len(boot_word(9, b)) for b in range(200)} >= {len("perfab_boot=") + 1, len("perfab_boot=") + 64}
    assert Replication(RUN, 1, 42).draw("w", (), 0) is None  # nothing perturbed
    assert Replication(RUN, 1, 42, ("x",)).unit_of(5) == 5  # with the run as the unit, each run its own boot


def test_a_stored_replication_round_trips_and_an_old_session_has_none():
    r = Replication(BOOT, 6, 1234, GUEST_PERTURBATIONS)
    assert stored({"replication": json.loads(json.dumps(r.to_json()))}) == r
    assert stored(None) == Replication(RUN, 1, 0)  # stored before perfab kept one: each run its own unit
    assert stored({"replication": {"unit": "boot", "units": "x"}}) == Replication(RUN, 1, 0)  # damaged: none


def test_repeats_of_one_boot_are_not_replicates():
    """An A/A whose boots differ by 1% and whose runs repeat their boot exactly: counted per run, the runs look
    like 18 samples of 6 values; judged per boot, the `**` rate stays at alpha."""
    spec = parse_spec(SPEC, "sim.toml")
    rng = np.random.default_rng(1)
    per_run = sum(compare(booted(rng, 6, 18, replication=None), spec).rows[0].verdict.value == "**"
                  for _ in range(200)) / 200
    per_boot = sum(compare(booted(rng, 6, 18), spec).rows[0].verdict.value == "**" for _ in range(200)) / 200
    assert per_boot <= 0.05 < per_run


def test_a_row_is_judged_on_one_mean_per_boot_and_finds_a_real_change():
    spec = parse_spec(SPEC, "sim.toml")
    row = compare(booted(np.random.default_rng(3), 6, 18, effect=0.05, within=0.002), spec).rows[0]
    assert row.verdict.value == "**" and row.estimate.method == "nonparametric"
    assert row.levels.base_units == row.levels.exp_units == 6 and row.levels.runs_per_unit == 3
    assert row.n_base == row.n_exp == 18 and len(row.base_values) == 18  # the runs are kept, judged per boot
    assert not any(d.kind == Kind.METHOD_FALLBACK for d in row.warnings)  # counts varying across boots: expected


def test_counts_identical_across_boots_are_exact_and_never_otherwise():
    spec = parse_spec(SPEC, "sim.toml")
    same = compare(booted(np.random.default_rng(4), 6, 12, effect=0.01, between=0.0), spec).rows[0]
    assert same.estimate.method == "exact" and same.verdict.value == "**"
    moved = compare(booted(np.random.default_rng(4), 6, 12, effect=0.01, between=0.0005), spec).rows[0]
    assert moved.estimate.method == "nonparametric"  # 0.05% between boots: one draw each, not exact counts


def test_variance_components_recover_each_level():
    rng = np.random.default_rng(5)
    data = booted(rng, 40, 160, between=0.01, within=0.005, replication=Replication(BOOT, 40, 7, ("x",)))
    row = compare(data, parse_spec(SPEC, "sim.toml")).rows[0]
    assert row.levels.between == pytest.approx(0.01, rel=0.3)
    assert row.levels.within == pytest.approx(0.005, rel=0.2)
    assert row.levels.add_to() == "boot"  # between-boot variation dominates: add boots
    flat = Levels("boot", 6, 6, 3.0, 0.001, 0.02)
    assert flat.add_to() == "runs"


def test_unit_means_and_components_by_hand():
    values, units, order = np.array([1.0, 3.0, 10.0, 12.0]), np.array([5, 5, 9, 9]), np.array([3, 1, 0, 2])
    means, first, counts = unit_means(values, units, order)
    assert means.tolist() == [11.0, 2.0] and first.tolist() == [0, 1] and counts.tolist() == [2, 2]
    between, within = components([(values, units)], 1.0)
    # within: deviations +-1 in each unit, 4 / (4 - 2) = 2; between: var(2, 11) = 40.5 less 2 / 2 runs
    assert within == pytest.approx(np.sqrt(2.0)) and between == pytest.approx(np.sqrt(40.5 - 1.0))


def test_optimal_runs_per_boot_follows_kalibera_and_jones():
    levels = Levels("boot", 6, 6, 3.0, 0.01, 0.02)
    # ceil(sqrt(c1 W / (c2 B))) = ceil(sqrt(10 * 4e-4 / (1 * 1e-4))) = ceil(6.32)
    assert optimal_runs(levels, 10.0, 1.0) == 7
    assert optimal_runs(Levels("boot", 6, 6, 3.0, 0.0, 0.02), 10.0, 1.0) is None


def test_a_guest_session_restored_from_one_unperturbed_boot_says_its_verdicts_are_per_run():
    spec = parse_spec(SPEC, "sim.toml")
    old = booted(np.random.default_rng(6), 6, 18, replication=None, sources={"a": {"guest_start": "snapshot"}})
    a = compare(old, spec)
    assert a.rows[0].levels is None
    assert [w.data for w in a.warnings if w.kind == Kind.ONE_DRAW] == [{"session": 1}]
    new = compare(booted(np.random.default_rng(6), 6, 18, sources={"a": {"guest_start": "snapshot"}}), spec)
    assert not any(w.kind == Kind.ONE_DRAW for w in new.warnings)


def test_the_report_names_the_unit_and_shows_each_levels_variance():
    spec = parse_spec(SPEC, "sim.toml")
    a = compare(booted(np.random.default_rng(8), 6, 18, effect=0.05, within=0.003), spec)
    text = render(a, "text")
    assert "replicas : 6 boots per side" in text and "seed 7" in text
    assert "VARIANCE: the boot is the unit" in text and "between boots" in text and "beyond per-boot noise" in text
    doc = json.loads(render(a, "json"))
    assert _validate(doc, SCHEMA) == []
    assert doc["replication"]["unit"] == "boot" and doc["replication"]["units"] == 6
    levels = doc["rows"][0]["levels"]
    assert levels["units_base"] == 6 and levels["add"] in ("boot", "runs") and levels["between"] > 0


def test_run_costs_are_read_from_the_guest_runs_notes():
    assert run_cost(("guest: TCG, 1 vCPU seen, booted, saved at the snapshot point (3f2a91c0d4e1) and powered off "
                     "in 12.5 s",)) == ("saved", 12.5)
    assert run_cost(("guest: TCG, 1 vCPU seen, restored from the side's saved guest 3f2a91c0d4e1 and powered off "
                     "in 1.9 s",)) == ("restored", 1.9)
    assert run_cost(("workload exited with status 1",)) is None


class _Booted(TimeBackend):
    """The time backend, declaring three boots per side: what the runner and store do with boots as units."""

    def replication(self, exp, seed):
        return Replication(BOOT, 3, seed, ("a test perturbation",))


def test_the_runner_stores_each_runs_place_and_the_session_its_replication(tmp_path):
    text = two_sides("perturb_seed = 99", runs=6, warmup=1, workload='argv = ["./bench", "{variant}"]\n'
                     'parser = "keyvalue"\n\n[[workload.metric]]\nname = "ops/s"\ndirection = "higher"\n')
    pads = {}

    def behaviour(argv, env):
        pads.setdefault(argv[-1], []).append(len(env.get("PERFAB_LAYOUT_PAD", "")))
        return FakeOutcome(wall_s=0.01, stdout=b"ops/s: 1000\n")

    store = Store(tmp_path / "r.db")
    runner = Runner(parse_spec(text, "s.toml"), store, _Booted(), FakeExecutor(behaviour), dict(FIXED_ENV))
    assert runner.run().status == "finished"
    session = store.sessions("t")[0]
    assert session.design["replication"] == {"unit": "boot", "units": 3, "seed": 99,
                                             "perturbations": ["a test perturbation"]}
    table = store.load("t").table
    assert sorted(table.rep[~table.warmup].tolist()) == sorted(list(range(6)) * 2)
    assert pads["a"][1:] == pads["b"][1:] and len(set(pads["a"][1:])) > 1  # run k of each side: one pad
    a = compare(store.load("t"), parse_spec(text, "s.toml"))
    assert a.rows[0].levels.base_units == 3 and a.replication["seed"] == 99
    store.close()


def test_sequential_runs_with_boots_as_the_unit_are_refused():
    text = two_sides('runs = "auto"', runs=4).replace("runs = 4\n", "")
    guest = text + ('\n[measure]\nbackend = "guest"\naccel = "tcg"\n')
    guest = guest.replace('name = "a"\n', 'name = "a"\n[variant.kernel]\nimage = "/boot/x"\n', 1)
    guest = guest.replace('name = "b"\n', 'name = "b"\n[variant.kernel]\nimage = "/boot/x"\n', 1)
    with pytest.raises(SpecError, match="the boot is the unit"):
        parse_spec(guest, "s.toml")
    parse_spec(guest + "boots = 1\n", "s.toml")  # one boot per side: no boots for the design to be short of
    parse_spec(guest.replace("[experiment]\n", "[experiment]\nperturb = false\n"), "s.toml")


def test_plan_names_each_runs_boot_and_the_design(tmp_path):
    images = sorted(Path("/boot").glob("vmlinuz-*"))
    if not images:
        pytest.skip("no /boot/vmlinuz-* here (make sysdeps installs linux-image-amd64)")
    kernel = f'[variant.kernel]\nimage = "{images[-1]}"\n'
    spec = tmp_path / "s.toml"
    spec.write_text(two_sides(runs=4, warmup=0).replace('name = "a"\n', f'name = "a"\n{kernel}', 1)
                    .replace('name = "b"\n', f'name = "b"\n{kernel}', 1)
                    + '\n[measure]\nbackend = "guest"\naccel = "tcg"\nboots = 2\n')
    code, out, err = cli("plan", str(spec))
    assert code == 0, err
    assert "replication: 2 boots per side x 2 runs" in out and "seed drawn when the session begins" in out
    runs = [line for line in out.splitlines() if re.match(r"\s+\d+\s+w\s", line)]
    assert [line.split()[-1] for line in runs[:4]] == ["0", "0", "1", "1"]


def test_a_runs_perturbation_reaches_its_guest_request_and_command_line():
    from perfab.kernel import initramfs, qemu
    from perfab.run.backends.guest import perturbed

    draw = Replication(BOOT, 6, 5, GUEST_PERTURBATIONS).draw("w", (), 8)
    doc = perturbed({"cmdline": "pti=on", "env": {"A": "1"}}, draw)
    assert doc["cmdline"] == f"pti=on {draw.word}" and doc["randomized"] is True and doc["spin"] == draw.run.spin
    assert bytes.fromhex(doc["entropy"]) == draw.run.entropy and doc["env"]["PERFAB_LAYOUT_PAD"] == "." * draw.run.pad
    request = qemu.BootRequest("k", ("/bin/true",), cmdline=doc["cmdline"], randomized=True)
    line = qemu.kernel_cmdline(request, "tcg")
    assert "norandmaps" not in line and "randomize_kstack_offset=off" not in line and line.endswith(draw.word)
    assert "norandmaps" in qemu.kernel_cmdline(qemu.BootRequest("k", ("/bin/true",)), "tcg")  # unperturbed: fixed
    files = initramfs._request(initramfs.Workload(argv=("/bin/true",), entropy=draw.run.entropy, spin=7))
    assert files["perturb"] == f"spin 7\nentropy {draw.run.entropy.hex()}\n".encode()
    assert "perturb" not in initramfs._request(initramfs.Workload(argv=("/bin/true",)))
