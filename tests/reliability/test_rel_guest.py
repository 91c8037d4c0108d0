"""Kernel sides booted for real: the booted kernel in every report, changed kernels kept apart, nothing left behind.

Debian's prebuilt kernel boots under QEMU/TCG (5-40 s a boot on a loaded
2-core machine), so the boots are shared: one module-scoped pair of
sessions (the image copied, then replaced by the same kernel's PVH vmlinux,
so the second session booted other bytes), one launcher boot whose real
result document is read with every row a spec may ask for, and two boots
stopped by a signal.  The situations: SETUP and JSON name each side's
kernel and label the host's; sessions of different kernels pooled warn
with both hashes; the profile is headed as counted kernel instructions and
stars exact changes without a test; report -o onto the image is refused;
``--resume`` after the image changed is refused before anything is
claimed; a row the guest lacks fails its run, never a zero; a launcher
that left no result says why; SIGTERM and SIGKILL of perfab mid-boot leave
no QEMU and, after the next start, no folder.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reliability_helpers import SRC, cli, file_digest, sessions_of, stored_rows, write

IMAGES = sorted(glob.glob("/boot/vmlinuz-*"))
pytestmark = pytest.mark.skipif(not IMAGES or shutil.which("qemu-system-x86_64") is None,
                                reason="needs qemu-system-x86 and linux-image-amd64 (make sysdeps)")
LOOP_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) { long n = atol(argv[1]); for (long i = 0; i < n; i++) syscall(SYS_getppid);
                                  printf("calls: %ld\n", n); return 0; }
"""


def guest_spec(image: Path, loop: Path, runs: int = 1, measure: str = "") -> str:
    return f"""[experiment]
name = "kg"
runs = {runs}
warmup = 0
[[variant]]
name = "a"
[variant.kernel]
image = "{image}"
cmdline = "pti=off"
[[variant]]
name = "b"
[variant.kernel]
image = "{image}"
cmdline = "pti=on"
[[workload]]
name = "w"
argv = ["{loop}", "2000"]
timeout = 300
[measure]
backend = "guest"
accel = "tcg"
vmstat = ["pgfault"]
{measure}
"""


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("loop")
    (d / "loop.c").write_text(LOOP_C)
    subprocess.run(["gcc", "-O2", "-static", "-o", str(d / "loop"), str(d / "loop.c")], check=True)
    return d / "loop"


@pytest.fixture(scope="module")
def pvh(tmp_path_factory) -> Path:
    """The vmlinux inside Debian's bzImage, which QEMU enters directly: the same kernel, other bytes."""
    from perfab.kernel.image import direct_image

    return Path(direct_image(IMAGES[-1], tmp_path_factory.mktemp("pvh")))


@pytest.fixture(scope="module")
def pooled(tmp_path_factory, loop, pvh) -> dict:
    """Two sessions of one spec: the first booted the bzImage, the second the same path holding the vmlinux."""
    d = tmp_path_factory.mktemp("pooled")
    image = d / "vmlinuz-test"
    shutil.copy(IMAGES[-1], image)
    # every run boots (snapshot = false): the two sessions pool a bzImage's boots with its vmlinux's; unperturbed,
    # so every boot of a side is one draw and the profile's shares repeat exactly (its exact rows, below)
    write(d / "k.toml", guest_spec(image, loop, measure="snapshot = false").replace("warmup = 0\n",
                                                                                  "warmup = 0\nperturb = false\n"))
    first = cli("run", "k.toml", "--db", "r.db", "--no-report", cwd=d)
    assert first.code == 0, first.err
    shutil.copy(pvh, image)
    second = cli("run", "k.toml", "--db", "r.db", "--no-report", "--new-session", cwd=d)
    assert second.code == 0, second.err
    return {"dir": d, "db": d / "r.db", "image": image, "bz": _sha(Path(IMAGES[-1])), "vm": _sha(pvh)}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_setup_names_each_sides_kernel_and_labels_the_hosts(pooled):
    got = cli("report", "kg", "--db", pooled["db"])
    assert got.code == 0, got.err
    text = " ".join(got.out.split())  # SETUP lines wrap
    assert f"Host kernel (ran QEMU): {os.uname().release}" in text
    release = Path(IMAGES[-1]).name.removeprefix("vmlinuz-")
    for side, cmdline in (("a", "pti=off"), ("b", "pti=on")):
        assert (f"kernel : {side} = {pooled['image']} (release {release}), sha256 {pooled['vm'][:12]}, "
                f'cmdline "{cmdline}"') in text, text


def test_json_carries_each_sides_kernel_as_the_schema_says(pooled):
    from perfab.report.document import FORMAT_VERSION
    from perfab.report.schema import KERNEL, SCHEMA

    got = cli("report", "kg", "--db", pooled["db"], "--format", "json")
    doc = json.loads(got.out)
    assert doc["format_version"] == FORMAT_VERSION and set(doc) == set(SCHEMA["properties"])
    assert all(set(k) == set(KERNEL["required"]) for k in doc["kernels"].values())
    release = Path(IMAGES[-1]).name.removeprefix("vmlinuz-")
    assert doc["kernels"]["a"] == {"image": str(pooled["image"]), "sha256": pooled["vm"], "release": release,
                                   "cmdline": "pti=off", "config_sha256": None, "label": "vmlinuz-test"}
    assert doc["kernels"]["b"]["cmdline"] == "pti=on"


def test_sessions_of_different_kernels_pooled_warn_with_both_hashes(pooled):
    import sqlite3

    con = sqlite3.connect(f"file:{pooled['db']}?mode=ro", uri=True)
    assert con.execute("SELECT side FROM sessions").fetchall() == [(None,), (None,)]  # every side ran in each
    con.close()
    got = cli("report", "kg", "--db", pooled["db"], "--format", "json")
    pooled_kernel = [w for w in json.loads(got.out)["warnings"] if w["kind"] == "pooled"
                     and w["data"]["differs"] == "kernel"]
    assert [w["data"]["side"] for w in pooled_kernel] == ["a", "b"]
    for w in pooled_kernel:
        assert f"{pooled['bz'][:12]} in session 1; {pooled['vm'][:12]} in session 2" in w["text"], w["text"]


def test_the_guest_profile_is_headed_as_counted_and_stars_exact_changes(pooled):
    got = cli("report", "kg", "--db", pooled["db"])
    assert "PROFILE: counted kernel instructions, % per symbol (a -> b; * = significant)" in got.out
    assert "self time, % of samples" not in got.out
    assert "a change is exact and starred without a test" in " ".join(got.out.split())


def test_the_exact_rows_are_the_profiles_unvarying_ones(pooled):
    from perfab.analyse.compare import analyse
    from perfab.store import open_store

    with open_store(str(pooled["db"]), readonly=True) as store:
        rows = analyse(store, "kg").profiles[("w", "b")]
    exact = [r for r in rows if r.exact]
    assert exact, "two deterministic boots per side read one share per symbol"
    assert all(r.base_rsd_pct == 0 and r.exp_rsd_pct == 0 for r in exact)
    assert all(r.significant == (r.delta_pp != 0) for r in exact)


@pytest.mark.parametrize("target", ["image", "symlink", "dotdot", "program"])
def test_report_output_onto_what_the_sessions_read_is_refused(pooled, loop, tmp_path, target):
    image = pooled["image"]
    path = {"image": image, "symlink": tmp_path / "link", "dotdot": image.parent / ".." / image.parent.name /
            image.name, "program": loop}[target]
    if target == "symlink":
        path.symlink_to(image)
    before = _sha(image), _sha(loop), file_digest(pooled["db"])
    got = cli("report", "kg", "--db", pooled["db"], "-o", path)
    what = "workload program of side 'a'" if target == "program" else "kernel image of side 'a'"
    got.one_line_error(2, f"is the {what} .*; writing it would destroy the input: give another output path$")
    assert (_sha(image), _sha(loop), file_digest(pooled["db"])) == before


@pytest.fixture(scope="module")
def launched(tmp_path_factory, loop) -> dict:
    """One real boot through the launcher: its result document, as the backend reads it."""
    d = tmp_path_factory.mktemp("launch")
    request = {"kernel": IMAGES[-1], "argv": [str(loop), "100"], "accel": "tcg", "timeout_s": 240,
               "cache_dir": str(d / "cache"), "result": str(d / "result.json")}
    write(d / "req.json", json.dumps(request))
    done = _launch(d / "req.json")
    assert done.returncode == 0, done.stderr
    return json.loads((d / "result.json").read_text())


def _launch(request: Path, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "perfab.kernel.launch", str(request)], capture_output=True,
                          env=env, timeout=300, **kw)


ROWS = {  # situation -> (interrupts, vmstat, the failure it gives or None)
    "vmstat-row-missing": ((), ("nosuchrow",), "the guest's /proc/vmstat has no row 'nosuchrow' (this kernel does "
                                               "not count it); remove it from measure.vmstat or name a row the guest "
                                               "kernel has"),
    "interrupt-row-missing": (("NOSUCHIRQ",), (), "the guest's /proc/interrupts has no row 'NOSUCHIRQ'"),
    "interrupt-row-lowercase": (("loc",), (), "the guest's /proc/interrupts has no row 'loc'"),
    "vmstat-row-a-prefix": ((), ("pgfa",), "the guest's /proc/vmstat has no row 'pgfa'"),
    "one-good-one-missing": (("LOC",), ("pgfault", "nr_nosuch"), "no row 'nr_nosuch'"),
    "rows-the-guest-has": (("LOC", "TLB"), ("pgfault", "nr_free_pages"), None),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_a_row_the_guest_lacks_fails_the_run_never_a_zero(launched, tmp_path, name):
    from perfab.run.backends.guest import read_result

    interrupts, vmstat, failure = ROWS[name]
    write(tmp_path / "result.json", json.dumps(launched))
    got = read_result(tmp_path / "result.json", interrupts, vmstat)
    if failure is None:
        assert got.failure is None
        assert set(got.metrics) >= {f"interrupts.{r}" for r in interrupts} | {f"vmstat.{r}" for r in vmstat}
    else:
        assert got.failure is not None and failure in got.failure, got.failure
        assert not got.metrics


def test_a_launcher_with_a_bad_request_says_why_not_just_no_result(tmp_path):
    from perfab.run.backends.guest import launcher_exit, read_result

    write(tmp_path / "req.json", json.dumps({"argv": ["/bin/true"]}))
    done = _launch(tmp_path / "req.json")
    write(tmp_path / "stderr", done.stderr)
    status = done.returncode << 8
    got = read_result(tmp_path / "none.json", launcher=launcher_exit(tmp_path / "stderr", status))
    assert got.failure == ("the guest launcher left no result: perfab.kernel.launch: the launch request has no "
                           "'kernel': add it")


def test_a_launcher_killed_mid_boot_says_by_what(tmp_path, loop):
    from perfab.run.backends.guest import launcher_exit

    request = {"kernel": IMAGES[-1], "argv": [str(loop), "10"], "accel": "tcg", "timeout_s": 240,
               "cache_dir": str(tmp_path / "cache")}
    write(tmp_path / "req.json", json.dumps(request))
    env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(_tmpdir(tmp_path))}
    proc = subprocess.Popen([sys.executable, "-m", "perfab.kernel.launch", str(tmp_path / "req.json")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = _boot_folder(tmp_path / "tmp")
    proc.kill()
    _, status = os.waitpid(proc.pid, 0)
    assert launcher_exit(tmp_path / "no-stderr", status) == ("the launcher was killed by SIGKILL (the run's timeout "
                                                             "or a stop)")
    assert folder.exists() and _qemu_of(tmp_path / "tmp"), "QEMU runs on in its own session, its folder stays"
    write(tmp_path / "k.toml", guest_spec(Path(IMAGES[-1]), loop))
    nxt = _perfab(["plan", "k.toml"], tmp_path, tmp_path / "tmp")  # the next perfab to start, with that TMPDIR
    _, err = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, err
    assert not folder.exists() and not _qemu_of(tmp_path / "tmp")


def _tmpdir(tmp_path: Path) -> Path:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return tmp_path / "tmp"


def _boot_folder(tmp: Path, timeout_s: float = 240) -> Path:
    """The boot folder once QEMU has started in it (its pid is written)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [p for p in tmp.glob("perfab-boot-*") if (p / "pid").exists() and (p / "console.log").exists()]
        if found:
            time.sleep(1.0)  # well into the boot
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no boot started under {tmp}")


def _qemu_of(tmp: Path) -> list[int]:
    """QEMU processes whose command line names a folder under ``tmp``."""
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"qemu-system" in cmdline and str(tmp).encode() in cmdline:
            out.append(int(proc.name))
    return out


def _perfab(argv: list[str], cwd: Path, tmp: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-c", "from perfab.cli import main_entry; main_entry()", *argv],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, loop, pvh) -> dict:
    """A session stopped by SIGTERM mid-boot, then one stopped by SIGKILL mid-boot, each with its own TMPDIR."""
    d = tmp_path_factory.mktemp("stopped")
    image = d / "vmlinuz-test"
    shutil.copy(IMAGES[-1], image)
    write(d / "k.toml", guest_spec(image, loop))
    out = {"dir": d, "image": image}
    for name, sig in (("term", signal.SIGTERM), ("kill", signal.SIGKILL)):
        tmp = d / f"tmp-{name}"
        tmp.mkdir()
        proc = _perfab(["run", "k.toml", "--db", f"{name}.db", "--no-report"], d, tmp)
        _boot_folder(tmp)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        out[name] = {"tmp": tmp, "code": proc.returncode, "err": err.decode(errors="replace"), "db": d / f"{name}.db"}
        deadline = time.monotonic() + 10
        while _qemu_of(tmp) and time.monotonic() < deadline:
            time.sleep(0.2)
        out[name]["qemu_after"] = _qemu_of(tmp)
        out[name]["left"] = sorted(p.name for p in tmp.iterdir())
    return out


def test_sigterm_mid_boot_leaves_no_qemu_and_no_folder(stopped):
    term = stopped["term"]
    assert term["code"] == 130, term["err"]
    assert "interrupted" in term["err"] and "Traceback" not in term["err"]
    assert term["qemu_after"] == [] and term["left"] == []


def test_sigkill_mid_boot_leaves_nothing_after_the_next_start(stopped, loop):
    kill = stopped["kill"]
    assert kill["code"] == -signal.SIGKILL
    assert kill["qemu_after"] == [], "QEMU outlived a SIGKILLed perfab"
    assert any(name.startswith("perfab-boot-") for name in kill["left"]), kill["left"]  # the kill left it
    nxt = _perfab(["plan", "k.toml"], stopped["dir"], kill["tmp"])
    _, err = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, err
    assert list(kill["tmp"].iterdir()) == [] and _qemu_of(kill["tmp"]) == []


def test_resume_after_the_image_changed_is_refused_before_anything_is_claimed(stopped, pvh):
    """The SIGTERMed session is unfinished; its image is replaced: one session must not mix two kernels."""
    db = stopped["term"]["db"]
    assert [status for _, status in sessions_of(db)] == ["interrupted"]
    image = stopped["image"]
    shutil.copy(pvh, image)
    before, rows = _claims(db), stored_rows(db)
    got = cli("run", "k.toml", "--db", db, "--resume", cwd=stopped["dir"])
    got.one_line_error(2, r"side 'a': kernel image \S+/vmlinuz-test changed since session 1 began \(sha256 "
                          rf"{_sha(Path(IMAGES[-1]))[:12]} then, {_sha(pvh)[:12]} now\): one session must not mix "
                          r"two kernels; restore the image or start a new session with --new-session$")
    assert _claims(db) == before and stored_rows(db) == rows


def _claims(db: Path) -> list[tuple]:
    """Each session's status, owner (the claim) and sources, read-only."""
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT id, status, owner, sources_json FROM sessions ORDER BY id").fetchall()
    finally:
        con.close()
