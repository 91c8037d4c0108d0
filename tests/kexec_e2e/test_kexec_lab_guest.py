"""End to end: a QEMU guest plays the lab machine and kexecs between two kernels in the plan's ABBA order.

The guest (``lab_guest``: TCG, Debian's 6.1 kernel, this host's root
filesystem read-only over 9p) runs ``perfab kexec start`` at its first
boot and ``perfab kexec resume`` at every later one, as the systemd unit
would.  The two sides boot Debian's image with ``pti=on`` and ``pti=off``;
each run reads its kernel's command line, so every stored run says which
kernel it ran under.  The store is a SQLite file on the read-write share:
what the guest stored is on this host when it powers off.  Each boot of
Debian's kernel under TCG takes tens of seconds: the test takes minutes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import lab_guest

REPO = Path(__file__).resolve().parents[2]
IMAGE = next(iter(sorted(Path("/boot").glob("vmlinuz-6.1.0-*-amd64"))), None)
PERFAB = Path(sys.executable).parent / "perfab"
GUEST_TIMEOUT_S = 1800

SPEC = """
[experiment]
name = "kexec-lab"
runs = 2
warmup = 0
seed = 1

[measure]
backend = "perf"
counters = ["task-clock", "page-faults", "context-switches"]

[[variant]]
name = "pti-on"
[variant.kernel]
boot = "kexec"
image = "{image}"
initrd = "/run/results/initrd.gz"
cmdline = "pti=on"
boot_timeout = 1200      # a TCG boot on a loaded 2-core machine takes minutes

[[variant]]
name = "pti-off"
[variant.kernel]
boot = "kexec"
image = "{image}"
initrd = "/run/results/initrd.gz"
cmdline = "pti=off"
boot_timeout = 1200

[[workload]]
name = "syscalls"
argv = ["/bin/sh", "-c", '''{syscalls} 20000
for s in on off; do echo "pti_$s: $(grep -cw pti=$s /proc/cmdline)"; done''']
parser = "keyvalue"
timeout = 300
"""


def _needs() -> str | None:
    for tool in ("qemu-system-x86_64", "modinfo", "kexec"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make sysdeps)"
    if IMAGE is None:
        return "Debian's 6.1 kernel is not in /boot"
    if REPO.resolve().parts[1:2] in (("tmp",), ("run",)):
        return f"the checkout is under /{REPO.resolve().parts[1]}, where the lab guest mounts a tmpfs over the host's"
    if not (REPO / "build" / "syscalls").is_file() or not PERFAB.is_file():
        return "the workloads are not built (make workloads) or perfab is not installed in a virtualenv"
    return None


@pytest.mark.skipif(_needs() is not None, reason=str(_needs()))
@pytest.mark.timeout(GUEST_TIMEOUT_S + 120)
def test_a_lab_guest_kexecs_between_two_kernels_in_abba_order(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    release = IMAGE.name.removeprefix("vmlinuz-")
    initrd = lab_guest.initramfs(release, share / "initrd.gz")
    (share / "spec.toml").write_text(SPEC.format(image=IMAGE, syscalls=REPO / "build" / "syscalls"))
    lab_guest.boot_script(share, PERFAB)
    console = tmp_path / "console.log"
    done = subprocess.run(lab_guest.qemu(IMAGE, initrd, share, console), capture_output=True, text=True,
                          timeout=GUEST_TIMEOUT_S, stdin=subprocess.DEVNULL)
    log = console.read_text(errors="replace")
    assert done.returncode == 0, f"QEMU: {done.stderr[-2000:]}\nconsole:\n{log[-4000:]}"
    runs, environment = _stored(share / "results.db")
    order = environment["kexec.boots"].split()
    print(f"\nkernels in the order they ran: {environment['kexec.boots']}\nboots:\n"
          + (share / "boots.log").read_text() + f"console (last lines):\n{log[-1500:]}")
    plan_sides = [r["variant"] for r in runs]
    boots = [plan_sides[0]] + [b for a, b in zip(plan_sides, plan_sides[1:]) if a != b]
    assert plan_sides in (["pti-on", "pti-off", "pti-off", "pti-on"], ["pti-off", "pti-on", "pti-on", "pti-off"])
    assert order == [f"{i}:{side}:confirmed" for i, side in enumerate(boots, 1)]  # A, BB, A: three kexecs
    assert all(r["status"] == "ok" for r in runs), runs
    for r in runs:  # each run read its own kernel's command line
        on = r["variant"] == "pti-on"
        assert (r["metrics"]["pti_on"], r["metrics"]["pti_off"]) == ((1.0, 0.0) if on else (0.0, 1.0)), r
        assert r["metrics"]["task-clock"] > 0  # perf stat, in the kexec'd kernel
    lines = (share / "boots.log").read_text().splitlines()
    assert len(lines) == 4 and "perfab.boot" not in lines[0]  # the home boot, then one per kexec
    for line, number, side in zip(lines[1:], range(1, 4), boots):
        assert f"perfab.boot=s1.b{number}" in line and ("pti=on" if side == "pti-on" else "pti=off") in line
    assert f"perfab: kexec session 1 finished: {' -> '.join(boots)}; then poweroff" in log
    assert not (share / "state" / "session.json").exists()
    report = subprocess.run([str(PERFAB), "report", "kexec-lab", "--db", str(share / "results.db")],
                            capture_output=True, text=True)
    expected = f"kernels  : {' -> '.join(boots)} (a kexec per boot)"
    assert report.returncode == 0 and expected in report.stdout, report.stdout


FALLBACK_SPEC = """
[experiment]
name = "kexec-fallback"
runs = 1
warmup = 0

[[variant]]
name = "good"
[variant.kernel]
boot = "kexec"
image = "{image}"
initrd = "/run/results/initrd.gz"

[[variant]]
name = "panics"
[variant.kernel]
boot = "kexec"
image = "{image}"
initrd = "/run/results/initrd.gz"
cmdline = "rdinit=/no/such/init"

[[workload]]
name = "true"
argv = ["/bin/true"]
"""


@pytest.mark.skipif(_needs() is not None, reason=str(_needs()))
@pytest.mark.timeout(GUEST_TIMEOUT_S + 120)
def test_a_side_whose_kernel_panics_fails_and_the_machine_comes_back_in_its_default_entry(tmp_path):
    """The side's kernel finds no init and panics; panic=10 reboots it through the firmware, which boots QEMU's
    own kernel and command line (the lab machine's default boot entry); the unit then finds the side failed."""
    share = tmp_path / "share"
    share.mkdir()
    initrd = lab_guest.initramfs(IMAGE.name.removeprefix("vmlinuz-"), share / "initrd.gz")
    (share / "spec.toml").write_text(FALLBACK_SPEC.format(image=IMAGE))
    lab_guest.boot_script(share, PERFAB)
    console = tmp_path / "console.log"
    done = subprocess.run(lab_guest.qemu(IMAGE, initrd, share, console, reboot=True), capture_output=True,
                          text=True, timeout=GUEST_TIMEOUT_S, stdin=subprocess.DEVNULL)
    log = console.read_text(errors="replace")
    print(f"\nconsole (last lines):\n{log[-2500:]}")
    assert done.returncode == 0, f"QEMU: {done.stderr[-2000:]}"
    runs, environment = _stored(share / "results.db")
    assert "Kernel panic - not syncing" in log
    by_side = {r["variant"]: r for r in runs}
    assert by_side["panics"]["status"] == "failed"
    assert environment["kexec.boots"].endswith(":panics:failed")
    con = sqlite3.connect(f"file:{share / 'results.db'}?mode=ro", uri=True)
    (reason,) = con.execute("SELECT reason FROM runs WHERE status = 'failed'").fetchone()
    (status,) = con.execute("SELECT status FROM sessions").fetchone()
    con.close()
    assert status == "aborted" and "into side panics failed: the machine came back in" in reason
    assert "the firmware booted the default entry" in reason
    boots = (share / "boots.log").read_text().splitlines()
    assert "perfab.boot" not in boots[-1]  # the last boot was the default entry's, not a side's
    assert "the machine runs the kernel the session began in" in log
    assert not (share / "state" / "session.json").exists()


def _stored(db: Path) -> tuple[list[dict], dict]:
    """The runs of the only session (side, status, metrics) in plan order, and the session's environment."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (env,) = con.execute("SELECT environment_json FROM sessions").fetchone()
        rows = con.execute("SELECT r.id, p.variant, r.status FROM runs r JOIN planned_runs p ON p.id = r.planned_id "
                           "ORDER BY p.seq").fetchall()
        runs = []
        for rid, variant, status in rows:
            metrics = dict(con.execute("SELECT metric, value FROM samples WHERE run_id = ?", (rid,)).fetchall())
            runs.append({"variant": variant, "status": status, "metrics": metrics})
    finally:
        con.close()
    return runs, json.loads(env)
