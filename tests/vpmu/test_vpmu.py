"""Counting a KVM guest's workload with perf stat inside the guest (the vPMU): parsing, budget, refusals.

KVM boots no kernel on this machine, so nothing here runs under KVM: the
parsing is tested on a real recording from a TCG guest (no PMU) and on two
outputs written by hand from perf's documented format (their NOTE says so);
the budget rules and the guest's command are tested as data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfab.errors import SpecError, UsageError
from perfab.run.backends import vpmu
from perfab.kernel.sides import KernelImage
from perfab.run.backends.guest import LAUNCHER_STDERR, RESULT, GuestBackend, vpmu_groups
from perfab.specfile import parse_spec

DATA = Path(__file__).resolve().parents[1] / "data" / "perf-guest"
ROWS = [f"{e}:{m}" for e in ("cycles", "instructions", "L1-icache-load-misses", "branch-misses",
                              "stalled-cycles-frontend") for m in "uk"]  # the order tcg_nopmu.request.json asks
U_GROUP = ("cycles:u", "instructions:u", "L1-icache-load-misses:u", "branch-misses:u", "stalled-cycles-frontend:u")
K_GROUP = ("cycles:k", "instructions:k", "L1-icache-load-misses:k", "branch-misses:k")


def _text(name: str) -> str:
    return (DATA / name).read_text()


def test_a_guest_without_a_pmu_is_refused_in_one_line():
    """Recorded in a TCG guest: every hardware event <not supported>."""
    group = tuple(e for e in ROWS)
    line = vpmu.pmu_problem(_text("tcg_nopmu.stderr"), group)
    assert line.startswith("the guest has no PMU: perf stat inside it reads <not supported> for cycles:u, cycles:k")
    assert "-cpu host,pmu=on" in line and "\n" not in line
    assert vpmu.pmu_problem(_text("kvm_vpmu_u.stderr"), U_GROUP) is None  # some hardware rows counted
    assert vpmu.pmu_problem(_text("tcg_nopmu.stderr"), ("user_time",)) is None  # nothing asked of a PMU


def test_the_recorded_guest_output_splits_into_the_workloads_stderr_and_perfs_rows():
    workload, rows = vpmu.split(_text("tcg_nopmu.stderr"), tuple(ROWS))
    assert workload == "workload-stderr" and rows.count('"event"') == 12
    got = vpmu.read(_text("tcg_nopmu.stderr"), tuple(ROWS))
    assert got.failure is None and set(got.excluded) == set(ROWS)
    assert all("<not supported>" in why for why in got.excluded.values())
    assert got.rusage == {"user_s": pytest.approx(0.001631), "sys_s": 0.0}


def test_vpmu_counts_are_read_by_the_perf_backends_rules():
    """Written by hand from perf's format (see NOTE.md): counts kept, an unsupported and multiplexed row out."""
    u = vpmu.read(_text("kvm_vpmu_u.stderr"), U_GROUP)
    assert u.failure is None
    assert u.metrics["cycles:u"] == 412903311 and u.metrics["instructions:u"] == 1467772043
    assert u.metrics["L1-icache-load-misses:u"] == 2191405  # printed without :u, matched by position
    assert u.metrics["branch-misses:u"] == 61877
    assert "<not supported>" in u.excluded["stalled-cycles-frontend:u"]
    assert u.rusage == {"user_s": pytest.approx(0.15742), "sys_s": pytest.approx(0.001104)}
    k = vpmu.read(_text("kvm_vpmu_k_multiplexed.stderr"), K_GROUP)
    assert set(k.metrics) >= {"cycles:k", "instructions:k"}
    assert k.excluded["L1-icache-load-misses:k"].startswith("multiplexed: the counter ran 74.00% of the time")
    assert "branch-misses:k" in k.excluded and "L1-icache-load-misses:k" not in k.metrics


def test_a_guest_that_printed_no_counts_fails_the_run():
    got = vpmu.read("workload died early\n", U_GROUP)
    assert got.failure.startswith("perf stat in the guest printed no counts")


@pytest.mark.parametrize("budget", [2, 3, 4, 6])
def test_the_rows_go_to_groups_within_the_budget_user_and_kernel_apart(budget):
    groups = vpmu_groups(tuple(ROWS), budget)
    assert all(len(g) <= budget for g in groups)
    assert sorted(e for g in groups for e in g) == sorted(ROWS)  # each event in exactly one run group
    assert all(len({e.rsplit(":", 1)[1] for e in g}) == 1 for g in groups)  # :u and :k never share a run
    assert len(groups) == 2 * -(-5 // budget)


def test_an_impossible_budget_is_a_usage_error():
    with pytest.raises(UsageError, match="need 2 PMU counters"):
        vpmu_groups(("cycles", "instructions", "branch-misses:u", "branch-misses:k"), 2)


def _spec(measure: str) -> str:
    return f"""
[experiment]
name = "g"
[[variant]]
name = "a"
[variant.kernel]
image = "/boot/vmlinuz"
[[variant]]
name = "b"
[variant.kernel]
image = "/boot/vmlinuz"
cmdline = "pti=off"
[[workload]]
name = "w"
argv = ["/bin/true"]
[measure]
{measure}
"""


def test_the_guest_runs_the_workload_inside_perf_stat_with_its_watchdog_off(tmp_path):
    exp = parse_spec(_spec('backend = "guest"\naccel = "kvm"\nmax_events_per_run = 4\n'
                           f'guest_counters = {ROWS!r}'.replace("'", '"')), "g.toml")
    backend = GuestBackend(exp.measure, tmp_path)
    backend.kernels = {v.name: KernelImage(Path("/boot/vmlinuz"), None, "img", cmdline="pti=off")
                       for v in exp.variants}  # the side's command line, as resolve_kernel gives it
    backend.accel = "kvm"
    assert len(backend.groups()) == 4
    side = backend.for_side(exp.variants[1], exp.workloads[0])
    req = side.request(["/bin/true"], tmp_path / "r.json", backend.groups()[0])
    assert req["argv"] == [vpmu.PERF, "stat", "-j", "-e", ",".join([*backend.groups()[0], "user_time",
                                                                      "system_time"]), "--", "/bin/true"]
    assert vpmu.PERF in req["files"] and req["cmdline"] == "pti=off nmi_watchdog=0"
    assert side.stderr_file == LAUNCHER_STDERR  # the runner writes the launcher's stderr tail there
    assert set(backend.metric_info()) >= set(ROWS)


def test_a_runs_counts_are_the_guest_perfs_rows_at_the_end_of_the_launchers_stderr(tmp_path):
    """The launcher's result (recorded under TCG, tests/data/guest-models) and its stderr tail as the runner
    leaves them in the run's scratch directory: the guest perf's rows join the launcher's readings."""
    import shutil

    exp = parse_spec(_spec('backend = "guest"\naccel = "kvm"\nmax_events_per_run = 5\n'
                           f'guest_counters = {list(U_GROUP)!r}'.replace("'", '"')), "g.toml")
    backend = GuestBackend(exp.measure, tmp_path)
    backend.kernels = {v.name: KernelImage(Path("/boot/vmlinuz"), None, "img") for v in exp.variants}
    backend.accel = "kvm"
    side = backend.for_side(exp.variants[0], exp.workloads[0])
    shutil.copy(DATA.parent / "guest-models" / "result.json", tmp_path / RESULT)
    (tmp_path / LAUNCHER_STDERR).write_text(_text("kvm_vpmu_u.stderr"))
    got = side.collect(tmp_path, U_GROUP, 0)
    assert got.failure is None and got.metrics["cycles:u"] == 412903311
    assert got.metrics["emulated_wall_s"] > 0 and got.metrics["HITM:u"] > 0  # the launcher's, kept beside perf's
    assert "<not supported>" in got.excluded["stalled-cycles-frontend:u"]
    (tmp_path / LAUNCHER_STDERR).write_text("workload-stderr\n")  # perf printed nothing: the run failed
    assert "perf stat in the guest printed no counts" in side.collect(tmp_path, U_GROUP, 0).failure


def test_guest_counters_under_tcg_are_refused_before_any_run(tmp_path):
    image = next(iter(sorted(Path("/boot").glob("vmlinuz-*"))), None)
    if image is None:
        pytest.skip("no kernel image in /boot")
    exp = parse_spec(_spec('backend = "guest"\naccel = "tcg"\nguest_counters = ["cycles:u"]')
                     .replace("/boot/vmlinuz", str(image)), "g.toml")
    with pytest.raises(UsageError) as info:
        GuestBackend(exp.measure, tmp_path).prepare(exp.variants, lambda line: None)
    assert "guest_counters are counted by the guest's vPMU, which only KVM gives it" in str(info.value)


def test_guest_counters_belong_to_the_guest_backend():
    with pytest.raises(SpecError, match="is read by the guest backend"):
        parse_spec(_spec('backend = "perf"\ncounters = ["cycles"]\nguest_counters = ["cycles"]'), "g.toml")


def test_kvm_guests_get_the_hosts_pmu(tmp_path):
    from perfab.kernel import qemu

    req = qemu.BootRequest(kernel="/boot/vmlinuz", argv=("/bin/true",), accel="kvm", plugin=None, direct=False)
    cmd = qemu.qemu_command(req, "kvm", tmp_path / "a.cpio", tmp_path, tmp_path)
    assert cmd[cmd.index("-cpu") + 1] == "host,pmu=on"


def test_the_guest_perf_reads_perf_61s_real_rows():
    """The guest runs this host's perf 6.1; its rows are those recorded on this machine's PMU-less VM
    (tests/data/perf/vm_group_u.json: perf's -o file of software events and unsupported hardware ones)."""
    text = (DATA.parent / "perf" / "vm_group_u.json").read_text()
    group = ("task-clock", "context-switches", "page-faults", "user_time", "system_time", "cycles", "instructions",
             "L1-icache-load-misses:u")  # record_vm.sh's order
    got = vpmu.read(text, group)
    assert got.failure is None and got.metrics["task-clock"] > 0 and "page-faults" in got.metrics
    assert set(got.excluded) == {"cycles", "instructions", "L1-icache-load-misses:u"}
    assert vpmu.pmu_problem(text, group).startswith("the guest has no PMU: perf stat inside it reads "
                                                    "<not supported> for cycles, instructions, L1-icache")


@pytest.mark.skipif(not list(Path("/boot").glob("vmlinuz-6.1.0-*-amd64")), reason="no Debian 6.1 kernel in /boot")
def test_the_probe_boots_a_guest_and_finds_no_pmu_under_tcg(tmp_path):
    """The check `prepare` makes under KVM before any run, made here under TCG (no PMU), for real."""
    image = sorted(Path("/boot").glob("vmlinuz-6.1.0-*-amd64"))[0]
    line = vpmu.probe(image, ("cycles:u", "instructions:k", "task-clock"), "tcg", str(tmp_path))
    assert line is not None and line.startswith("the guest has no PMU: perf stat inside it reads <not supported> "
                                                "for cycles:u, instructions:k;")
