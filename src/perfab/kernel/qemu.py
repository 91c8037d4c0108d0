"""Boot a kernel under QEMU, run one workload inside and power the guest off.

``boot(BootRequest)`` builds the initramfs (``perfab.kernel.initramfs``),
starts ``qemu-system-x86_64`` in its own process group with the console on
the first serial port (a file) and the result channel on the second, waits
at most ``timeout_s`` and kills the whole group past it.  A guest that
panics, hangs or never reaches the workload is a ``BootResult`` with
``failure`` set and the console's last lines, never an exception or a hang.

Acceleration: ``accel="auto"`` uses KVM only where ``probe_kvm()`` booted a
tiny multiboot payload under it within a few seconds (a nested guest can
open /dev/kvm yet hang after the BIOS), otherwise TCG.  TCG runs with one
thread (``-accel tcg,thread=single``) so that the plugin's callbacks are
serialised.  ``deterministic=True`` (the default) also removes what varies
between identical boots: the guest's real-time clock follows the virtual
clock (``-rtc clock=vm`` from a fixed date), user-space address
randomisation and the per-syscall kernel stack offset are off
(``norandmaps randomize_kstack_offset=off``) and guest time follows the
instruction count (``-icount shift=0,sleep=off``).  QEMU 7.2 hangs when a
kernel brings up its secondary CPUs at boot under icount, but not when they
are onlined later: an SMP guest boots with ``maxcpus=1`` and its init
onlines the others through sysfs before the workload.  Measured on Debian's
6.1 kernel: identical boots count exactly the same instructions, with one
vCPU or several; without icount, kernel counts spread by about 1.5-2%.
Under TCG the guest's wall time is emulation time, not the CPU's.
``randomized=True`` keeps icount and the fixed clock but leaves the
kernel's randomisation on: what it draws then follows the boot's command
line and the ``entropy`` credited before the workload, the seeded
perturbation of ``perfab.replication``.
``snapshot=True`` (TCG with icount) boots only once per machine, kernel and
initramfs: that boot saves the guest at the snapshot point before its
workload, and later boots restore it there (``perfab.kernel.snapshot``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from perfab import scratch
from perfab.errors import ToolError, UsageError
from perfab.kernel import guestresult, image, initramfs, modules, qemuproc, qmp, snapshot, tcg
from perfab.kernel.snapshot import KEEP as SAVED_KEPT

QEMU = "qemu-system-x86_64"
PLUGIN_DIR = Path(__file__).resolve().parents[3] / "native" / "tcg"
# quiet: a serial console costs emulated time per byte
BASE_CMDLINE = "console=ttyS0 quiet panic=-1 rdinit=/init nokaslr"
DETERMINISTIC_CMDLINE = "norandmaps randomize_kstack_offset=off"
ONE_CPU_AT_BOOT = "maxcpus=1"  # under icount QEMU 7.2 hangs bringing up CPUs at boot; the init onlines them
FIXED_RTC = "clock=vm,base=2024-01-01T00:00:00"
TAIL_LINES = 40
HOST_ROOT_DEVICE = [  # this machine's / shared read-only over virtio-9p (root = "host"); the guest overlays a tmpfs
    "-fsdev", "local,id=perfabroot,path=/,security_model=none,readonly=on,multidevs=remap",
    "-device", f"virtio-9p-pci,fsdev=perfabroot,mount_tag={initramfs.HOST_ROOT_TAG}"]
HITM_LINES = 200  # data lines the coherence model lists per window, most HITM first (as many as symbols named)
QMP_SOCKET = "qmp.sock"  # in the boot's folder, when per-CPU bases are asked for


@dataclass(frozen=True)
class PluginOptions:
    """What the TCG plugin measures besides instruction counts."""

    cache: bool = False  # simulate L1i, L1d and LL
    l1i: str = "32768:8:64"  # L1i size:assoc:line in bytes
    l1d: str = "32768:8:64"  # L1d size:assoc:line in bytes
    ll: str = "8388608:16:64"  # LL size:assoc:line in bytes
    branch: bool = False  # cachegrind's branch predictor: conditional and indirect branches and misses
    coherence: bool = False  # private L1d per vCPU with MESI: HITM and invalidations, by symbol and data line


@dataclass(frozen=True)
class BootRequest:
    """One boot: a kernel, a machine and the workload to run inside."""

    kernel: str  # bzImage (or vmlinux with a PVH note) path
    argv: tuple[str, ...]  # the workload's command inside the guest
    cmdline: str = ""  # extra kernel command line, after perfab's own (later options win)
    vcpus: int = 1  # -smp
    memory_mb: int = 1024  # -m
    accel: str = "auto"  # "auto" (KVM where the probe works, else TCG), "tcg" or "kvm"
    plugin: PluginOptions | None = None  # count with the TCG plugin (TCG only); None: no plugin
    cwd: str = "/"  # the workload's working directory in the guest
    env: tuple[tuple[str, str], ...] = ()  # the workload's environment (PATH added when absent)
    files: tuple[str, ...] = ()  # host files/directories copied in at the same paths
    root: str = "initramfs"  # "initramfs": the workload's files copied in; "host": this machine's root over 9p
    maps: tuple[tuple[str, str], ...] = ()  # (host directory, guest directory): shown at the guest path
    service: initramfs.Service | None = None  # a server started in the guest before the workload
    timeout_s: float = 300.0  # kill the guest past this much host wall time
    kallsyms: bool = False  # also return the guest kernel's text symbols (sent once per kernel, then cached)
    direct: bool = True  # boot the vmlinux inside a bzImage directly (PVH) when the kernel allows
    deterministic: bool = True  # TCG: fixed RTC, no address/stack randomisation, icount (SMP: maxcpus=1, init onlines)
    cache_dir: str | None = None  # initramfs and helper cache; None: ~/.cache/perfab/kernel
    percpu_at: int | None = None  # address of __per_cpu_offset[]: read over QMP once the workload starts
    snapshot: bool = False  # start from the side's saved guest (perfab.kernel.snapshot) where snapshot.problem allows
    randomized: bool = False  # the guest randomises (ASLR, kernel stack offsets), seeded: perfab.replication
    entropy: bytes = b""  # credited to the guest's random pool before the workload; b"": fixed bytes
    spin: int = 0  # iterations the launcher spins before the workload's start marker (the timer's phase)
    keep: int = SAVED_KEPT  # saved guests kept in the cache (a session with several boots keeps them all)


@dataclass(frozen=True)
class BootResult:
    """What one boot produced; ``failure`` is None when the workload ran to its end."""

    status: int | None  # workload exit code (128+N for signal N); None when it did not finish
    stdout: bytes  # the workload's standard output
    stderr: bytes  # the workload's standard error
    guest_wall_s: float | None  # workload wall time by the guest's CLOCK_MONOTONIC (emulated under TCG)
    host_wall_s: float  # QEMU's whole life on the host: boot, workload, power-off
    to_workload_s: float | None  # host seconds from QEMU's start to the console's "workload start"
    accel: str  # "tcg" or "kvm", the engine used
    vcpus_seen: int | None  # processors listed by the guest's /proc/cpuinfo
    failure: str | None  # one line: why the run failed; None on success
    console_tail: str  # the console's last lines
    records: tuple[tcg.Window, ...] = ()  # plugin windows, one per start/stop marker pair
    deltas: dict[str, int] = field(default_factory=dict)  # irq.NAME / vmstat.NAME deltas over the workload
    kallsyms: bytes = b""  # "ADDR TYPE NAME" text symbols from the guest, when asked for
    service: dict[str, dict[str, float]] = field(default_factory=dict)  # "before"/"after" -> the server's usage
    service_log: bytes = b""  # the end of the server's output
    percpu_bases: tuple[int, ...] = ()  # each vCPU's per-CPU area (__per_cpu_offset[]), when asked and read
    start: str = "booted"  # "booted" to the workload, "saved" at the snapshot point on the way, or "restored" there
    snapshot: str = ""  # the key of the saved guest this boot saved or restored; "": none
    snapshot_note: str = ""  # why a boot to the snapshot point did not save the guest


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfab" / "kernel"


def qemu_binary() -> str:
    found = shutil.which(QEMU)
    if not found:
        raise ToolError(f"{QEMU} is not installed: install qemu-system-x86 (make sysdeps)")
    return found


# ---- KVM probe ----------------------------------------------------------

def _probe_payload() -> bytes:
    """A multiboot (a.out kludge) image that writes 0x31 to isa-debug-exit and halts."""
    load = 0x100000
    code = bytes([0xB0, 0x31, 0xE6, 0xF4, 0xF4, 0xEB, 0xFD])  # mov al,0x31; out 0xf4,al; hlt; jmp $-1
    magic, flags = 0x1BADB002, 0x00010000
    header_len = 32
    end = load + header_len + len(code)
    header = struct.pack("<8I", magic, flags, (-(magic + flags)) & 0xFFFFFFFF,
                         load, load, end, end, load + header_len)
    return header + code


@lru_cache(maxsize=1)
def probe_kvm(timeout_s: float = 3.0) -> bool:
    """True when a tiny guest runs to its end under KVM within ``timeout_s`` (cached per process)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK) or not shutil.which(QEMU):
        return False
    with scratch.owned("kvm") as tmp:
        image = Path(tmp) / "probe.bin"
        image.write_bytes(_probe_payload())
        cmd = [QEMU, "-nodefaults", "-no-user-config", "-display", "none", "-accel", "kvm",
               "-m", "64", "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04", "-kernel", str(image)]
        code, _, _ = qemuproc.run_group(cmd, timeout_s, Path(tmp) / "stderr")
    return code == (0x31 << 1) | 1


# ---- plugin -------------------------------------------------------------

def plugin_path(cache: Path | None = None) -> Path:
    """``perfab_tcg.so``, compiled from native/tcg into the cache on first use."""
    sources = plugin_sources()
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    cache = cache or default_cache()
    target = cache / f"perfab_tcg-{digest}.so"
    if target.exists():
        return target
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise ToolError("no C compiler to build the TCG plugin: install gcc (make sysdeps)")
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=".perfab_tcg-", suffix=".so")
    os.close(fd)
    try:
        proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", tmp,
                               *(str(p) for p in sources if p.suffix == ".c")],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise ToolError(f"cannot build the TCG plugin: {proc.stderr.strip()[:300]}")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def plugin_sources() -> list[Path]:
    """The plugin's C sources and headers under native/tcg, in a fixed order."""
    sources = sorted(PLUGIN_DIR.glob("*.[ch]"))
    if not any(p.name == "perfab_tcg.c" for p in sources):
        raise ToolError(f"the TCG plugin's source is missing under {PLUGIN_DIR}: run from a perfab checkout")
    return sources


def _plugin_arg(opts: PluginOptions, out: Path, cache: Path) -> str:
    def esc(s: str) -> str:
        return s.replace(",", ",,")
    parts = [f"file={esc(str(plugin_path(cache)))}", f"out={esc(str(out))}"]
    if opts.cache:
        parts += ["cache=on", f"l1i={opts.l1i}", f"l1d={opts.l1d}", f"ll={opts.ll}"]
    elif opts.coherence:
        parts.append(f"l1d={opts.l1d}")
    parts += ["branch=on"] if opts.branch else []
    parts += ["coherence=on", f"lines={HITM_LINES}"] if opts.coherence else []
    return ",".join(parts)


# ---- boot ---------------------------------------------------------------

def _check(req: BootRequest) -> None:
    if not os.path.isfile(req.kernel):
        raise UsageError(f"kernel image {req.kernel} does not exist: give a bzImage path")
    if req.accel not in ("auto", "tcg", "kvm"):
        raise UsageError(f"accel {req.accel!r} is not one of auto, tcg, kvm")
    if req.vcpus < 1 or req.memory_mb < 64:
        raise UsageError(f"vcpus {req.vcpus} / memory_mb {req.memory_mb}: need >= 1 vCPU and >= 64 MiB")
    if req.plugin is not None and req.accel == "kvm":
        raise UsageError("the TCG plugin counts only under TCG: set accel to tcg or auto")
    geometries = (("l1i", req.plugin.l1i), ("l1d", req.plugin.l1d), ("ll", req.plugin.ll)) if req.plugin else ()
    for name, geometry in geometries:
        if not _geometry_ok(geometry):
            raise UsageError(f"{name} = {geometry!r} is not SIZE:ASSOC:LINE in bytes with power-of-two "
                             "line and set count (e.g. 32768:8:64)")


def _geometry_ok(text: str) -> bool:
    try:
        size, assoc, line = (int(x) for x in text.split(":"))
    except ValueError:
        return False
    if min(size, assoc, line) <= 0 or line & (line - 1) or size % (assoc * line):
        return False
    sets = size // (assoc * line)
    return sets & (sets - 1) == 0


def choose_accel(req: BootRequest) -> str:
    """The engine a request runs on: a plugin needs TCG; "auto" takes KVM only where it works."""
    if req.accel == "kvm" or (req.accel == "auto" and req.plugin is None and probe_kvm()):
        return "kvm"
    return "tcg"


def qemu_command(req: BootRequest, accel: str, archive: Path, work: Path, cache: Path) -> list[str]:
    """The full qemu-system-x86_64 command line for one boot."""
    cmd = [qemu_binary(), "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
           "-m", str(req.memory_mb), "-smp", str(req.vcpus),
           "-kernel", image.direct_image(req.kernel, cache) if req.direct else req.kernel, "-initrd", str(archive),
           "-append", kernel_cmdline(req, accel),
           "-serial", f"file:{work / 'console.log'}", "-serial", f"file:{work / 'result.bin'}"]
    if accel == "kvm":
        cmd += ["-accel", "kvm", "-cpu", "host,pmu=on"]  # the vPMU: perf stat inside counts (run.backends.vpmu)
    else:
        cmd += ["-accel", "tcg,thread=single"]
        if req.deterministic:
            cmd += ["-rtc", FIXED_RTC]
            cmd += ["-icount", "shift=0,sleep=off"]
    if req.plugin is not None and accel == "tcg":
        cmd += ["-plugin", _plugin_arg(req.plugin, work / "plugin.jsonl", cache)]
    if req.root == "host":
        cmd += HOST_ROOT_DEVICE
    if req.percpu_at is not None:
        cmd += ["-qmp", f"unix:{work / QMP_SOCKET},server=on,wait=off"]
    if req.snapshot and snapshot.problem(accel, req.deterministic) is None:
        cmd += snapshot.MACHINE
    return cmd


def kernel_cmdline(req: BootRequest, accel: str) -> str:
    """perfab's options, the deterministic ones under TCG, then the request's (later ones win)."""
    parts = [BASE_CMDLINE]
    if req.deterministic and accel == "tcg":
        parts.append("" if req.randomized else DETERMINISTIC_CMDLINE)
        if req.vcpus > 1:
            parts.append(ONE_CPU_AT_BOOT)
    parts.append(req.cmdline)
    return " ".join(p for p in parts if p)


def boot(req: BootRequest) -> BootResult:
    """Boot ``req.kernel`` (or restore its saved guest), run the workload, power off; failures are in the result."""
    _check(req)
    cache = Path(req.cache_dir) if req.cache_dir else default_cache()
    known_syms = image.cached_kallsyms(req.kernel, cache) if req.kallsyms else None
    accel = choose_accel(req)
    saving = req.snapshot and snapshot.problem(accel, req.deterministic) is None
    workload = initramfs.Workload(argv=tuple(req.argv), cwd=req.cwd, env=tuple(req.env),
                                  files=tuple(req.files), kallsyms=req.kallsyms and known_syms is None,
                                  service=req.service, root=req.root, maps=tuple(req.maps),
                                  modules=modules.for_host_root(req.kernel) if req.root == "host" else (),
                                  snapshot=saving, entropy=req.entropy, spin=req.spin)
    scratch.sweep()  # what killed launchers left (their QEMU stopped first)
    with scratch.owned("boot") as work:
        # a run's own perturbation in the archive (no saved guest to give it to): the archive is this run's alone
        archive = initramfs.build(workload, cache, into=work if not saving and workload.perturbed else None)
        guide = _guide(req, accel, archive, work, cache, workload) if saving else None
        cmd = qemu_command(req, accel, archive, work, cache) + (guide.arguments() if guide else [])
        start = time.monotonic()
        bases: list[int] = []
        read = None if req.percpu_at is None else lambda: bases.extend(
            qmp.read_words(work / QMP_SOCKET, req.percpu_at, req.vcpus) or ())
        code, timed_out, to_workload, failed = _run(req, cmd, work, read, guide)
        res = _collect(req, work, accel, code, timed_out, time.monotonic() - start, to_workload)
        res = replace(res, percpu_bases=tuple(bases), **_started(guide, failed))
    if known_syms is not None:
        return replace(res, kallsyms=known_syms)
    if res.kallsyms and res.failure is None:
        image.remember_kallsyms(req.kernel, cache, res.kallsyms)
    return res


def _run(req: BootRequest, cmd: list[str], work: Path, on_start, guide: snapshot.Guide | None):
    """QEMU's run: (exit code or None, timed out, seconds to the workload, why the snapshot point failed or None)."""
    failed = None
    try:
        code, timed_out, to_workload = qemuproc.run_group(cmd, req.timeout_s, work / "qemu.stderr",
                                                          work / "console.log", on_start, guide and guide.step)
    except snapshot.Failure as e:
        code, timed_out, to_workload, failed = None, False, None, str(e)
    finally:
        if guide is not None:
            guide.close()
    if guide is not None and code is not None and failed is None:
        failed = guide.unloaded(guestresult.qemu_error(guestresult.read_text(work / "qemu.stderr")))
    return code, timed_out, to_workload, failed


def _guide(req: BootRequest, accel: str, archive: Path, work: Path, cache: Path,
           workload: initramfs.Workload) -> snapshot.Guide:
    """The snapshot point's driver for this boot: its saved guest is keyed by the machine, not the plugin."""
    machine = qemu_command(replace(req, plugin=None, percpu_at=None), accel, archive, Path("/boot"), cache)
    found = snapshot.Saved.at(cache, snapshot.key(machine, req.kernel))
    return snapshot.Guide(work, found, initramfs.run_request(workload), req.keep)


def _started(guide: snapshot.Guide | None, failed: str | None) -> dict:
    """How the guest began (``BootResult.start``, ``snapshot``, ``snapshot_note``) and a snapshot point's failure."""
    if guide is None:
        return {}
    out = {"start": guide.start, "snapshot": guide.found.key if guide.start != "booted" else "",
           "snapshot_note": guide.note}
    return {**out, "failure": failed, "status": None} if failed else out


# ---- results ------------------------------------------------------------

def _collect(req: BootRequest, work: Path, accel: str, code: int | None, timed_out: bool,
             host_wall: float, to_workload: float | None) -> BootResult:
    console = guestresult.read_text(work / "console.log")
    tail = "\n".join(console.splitlines()[-TAIL_LINES:])
    sections = guestresult.parse_sections(guestresult.read_bytes(work / "result.bin"))
    records = tuple(tcg.read_records(work / "plugin.jsonl")) if req.plugin and accel == "tcg" else ()
    status, wall = guestresult.parse_status(sections.get("status", b""))
    failure = guestresult.failure(sections, status, console, code, timed_out, req.timeout_s,
                                  guestresult.read_text(work / "qemu.stderr"))
    seen = guestresult.int_or_none(sections.get("cpus", b""))
    if failure is None and seen is not None and seen < req.vcpus and ONE_CPU_AT_BOOT in kernel_cmdline(req, accel):
        failure = (f"the guest brought up {seen} of {req.vcpus} vCPUs: a deterministic SMP guest boots with "
                   f"{ONE_CPU_AT_BOOT} and its init onlines the others through /sys; build the kernel with "
                   "CONFIG_SYSFS=y and CONFIG_SMP=y")
    return BootResult(
        status=status if failure is None else None,
        stdout=sections.get("stdout", b""), stderr=sections.get("stderr", b""),
        guest_wall_s=wall, host_wall_s=host_wall, to_workload_s=to_workload, accel=accel,
        vcpus_seen=seen,
        failure=failure, console_tail=tail, records=records, kallsyms=sections.get("kallsyms", b""),
        service=guestresult.parse_service(sections.get("service", b"")), service_log=sections.get("service.log", b""),
        deltas={**guestresult.interrupt_deltas(sections.get("irq0", b""), sections.get("irq1", b"")),
                **guestresult.vmstat_deltas(sections.get("vm0", b""), sections.get("vm1", b""))})


