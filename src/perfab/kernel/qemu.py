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
(``norandmaps randomize_kstack_offset=off``) and, with one vCPU, guest time
follows the instruction count (``-icount shift=0,sleep=off``).  Measured on
Debian's 6.1 kernel: five identical 1-vCPU boots count exactly the same
instructions; without icount, kernel counts spread by about 1.5%.  QEMU 7.2
hangs bringing up a second vCPU under icount, so SMP guests run without it
and their timer interrupts follow host time.  Under TCG the guest's wall
time is emulation time, not the CPU's.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from perfab.errors import ToolError, UsageError
from perfab.kernel import initramfs, tcg

QEMU = "qemu-system-x86_64"
PLUGIN_DIR = Path(__file__).resolve().parents[3] / "native" / "tcg"
BASE_CMDLINE = "console=ttyS0 panic=-1 rdinit=/init nokaslr"
DETERMINISTIC_CMDLINE = "norandmaps randomize_kstack_offset=off"
FIXED_RTC = "clock=vm,base=2024-01-01T00:00:00"
TAIL_LINES = 40
WORKLOAD_START = b"perfab: workload start"  # the init's console line before the launcher runs


@dataclass(frozen=True)
class PluginOptions:
    """What the TCG plugin measures besides instruction counts."""

    cache: bool = False  # simulate L1i, L1d and LL
    l1i: str = "32768:8:64"  # L1i size:assoc:line in bytes
    l1d: str = "32768:8:64"  # L1d size:assoc:line in bytes
    ll: str = "8388608:16:64"  # LL size:assoc:line in bytes


@dataclass(frozen=True)
class BootRequest:
    """One boot: a kernel, a machine and the workload to run inside."""

    kernel: str  # bzImage path
    argv: tuple[str, ...]  # the workload's command inside the guest
    cmdline: str = ""  # extra kernel command line, after perfab's own (later options win)
    vcpus: int = 1  # -smp
    memory_mb: int = 1024  # -m
    accel: str = "auto"  # "auto" (KVM where the probe works, else TCG), "tcg" or "kvm"
    plugin: PluginOptions | None = None  # count with the TCG plugin (TCG only); None: no plugin
    cwd: str = "/"  # the workload's working directory in the guest
    env: tuple[tuple[str, str], ...] = ()  # the workload's environment (PATH added when absent)
    files: tuple[str, ...] = ()  # host files/directories copied in at the same paths
    timeout_s: float = 300.0  # kill the guest past this much host wall time
    kallsyms: bool = False  # also return the guest kernel's text symbols (sent once per kernel, then cached)
    deterministic: bool = True  # TCG: fixed RTC, no address/stack randomisation, icount with 1 vCPU
    cache_dir: str | None = None  # initramfs and helper cache; None: ~/.cache/perfab/kernel


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
def probe_kvm(timeout_s: float = 5.0) -> bool:
    """True when a tiny guest runs to its end under KVM within ``timeout_s`` (cached per process)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK) or not shutil.which(QEMU):
        return False
    with tempfile.TemporaryDirectory(prefix="perfab-kvm-") as tmp:
        image = Path(tmp) / "probe.bin"
        image.write_bytes(_probe_payload())
        cmd = [QEMU, "-nodefaults", "-no-user-config", "-display", "none", "-accel", "kvm",
               "-m", "64", "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04", "-kernel", str(image)]
        code, _, _ = _run_group(cmd, timeout_s, Path(tmp) / "stderr")
    return code == (0x31 << 1) | 1


# ---- plugin -------------------------------------------------------------

def plugin_path(cache: Path | None = None) -> Path:
    """``perfab_tcg.so``, compiled from native/tcg into the cache on first use."""
    sources = [PLUGIN_DIR / "perfab_tcg.c", PLUGIN_DIR / "qemu_plugin_api.h"]
    if not all(p.is_file() for p in sources):
        raise ToolError(f"the TCG plugin's source is missing under {PLUGIN_DIR}: run from a perfab checkout")
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
                               str(sources[0])], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise ToolError(f"cannot build the TCG plugin: {proc.stderr.strip()[:300]}")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def _plugin_arg(opts: PluginOptions, out: Path, cache: Path) -> str:
    def esc(s: str) -> str:
        return s.replace(",", ",,")
    parts = [f"file={esc(str(plugin_path(cache)))}", f"out={esc(str(out))}"]
    if opts.cache:
        parts += ["cache=on", f"l1i={opts.l1i}", f"l1d={opts.l1d}", f"ll={opts.ll}"]
    return ",".join(parts)


# ---- boot ---------------------------------------------------------------

def direct_image(kernel: str, cache: Path) -> str:
    """An ELF vmlinux QEMU can enter directly (PVH), extracted once from a bzImage; else ``kernel``.

    Under TCG the bzImage's own decompressor runs emulated and costs seconds
    at every boot; a kernel built with CONFIG_PVH carries an ELF note QEMU
    uses to start the uncompressed vmlinux at once.  xz and gzip payloads are
    extracted (cached by the bzImage's hash); anything else boots as given."""
    data = Path(kernel).read_bytes()
    if data[:4] == b"\x7fELF":
        return kernel
    target = cache / f"vmlinux-{hashlib.sha256(data).hexdigest()[:20]}"
    if target.exists():
        return str(target) if target.stat().st_size else kernel
    elf = _decompress_payload(data)
    blob = elf if elf is not None and _has_pvh_note(elf) else b""
    initramfs._write_atomic(target, blob)  # empty: remembered as not directly bootable
    return str(target) if blob else kernel


def _decompress_payload(data: bytes) -> bytes | None:
    for magic, open_ in ((b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(b)),
                         (b"\x1f\x8b\x08", lambda b: gzip.GzipFile(fileobj=__import__("io").BytesIO(b)).read())):
        at = data.find(magic)
        if at < 0:
            continue
        try:
            out = open_(data[at:])
        except (lzma.LZMAError, OSError, EOFError):
            continue
        if out[:4] == b"\x7fELF":
            return out
    return None


def _has_pvh_note(elf: bytes) -> bool:
    """True when the ELF has a Xen note of type 18 (XEN_ELFNOTE_PHYS32_ENTRY), QEMU's PVH entry."""
    if elf[4] != 2 or elf[5] != 1:  # 64-bit little-endian only
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        ptype, _flags, off, _va, _pa, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if ptype != 4:  # PT_NOTE
            continue
        pos, end = off, off + filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12: pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == 18:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def _check(req: BootRequest) -> None:
    if not os.path.isfile(req.kernel):
        raise UsageError(f"kernel image {req.kernel} does not exist: give a bzImage path")
    if req.accel not in ("auto", "tcg", "kvm"):
        raise UsageError(f"accel {req.accel!r} is not one of auto, tcg, kvm")
    if req.vcpus < 1 or req.memory_mb < 64:
        raise UsageError(f"vcpus {req.vcpus} / memory_mb {req.memory_mb}: need >= 1 vCPU and >= 64 MiB")
    if req.plugin is not None and req.accel == "kvm":
        raise UsageError("the TCG plugin counts only under TCG: set accel to tcg or auto")
    for name, geometry in (("l1i", req.plugin.l1i), ("l1d", req.plugin.l1d), ("ll", req.plugin.ll)) if req.plugin else ():
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


def qemu_command(req: BootRequest, accel: str, image: Path, work: Path, cache: Path) -> list[str]:
    """The full qemu-system-x86_64 command line for one boot."""
    cmd = [qemu_binary(), "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
           "-m", str(req.memory_mb), "-smp", str(req.vcpus),
           "-kernel", direct_image(req.kernel, cache), "-initrd", str(image),
           "-append", kernel_cmdline(req, accel),
           "-serial", f"file:{work / 'console.log'}", "-serial", f"file:{work / 'result.bin'}"]
    if accel == "kvm":
        cmd += ["-accel", "kvm", "-cpu", "host"]
    else:
        cmd += ["-accel", "tcg,thread=single"]
        if req.deterministic:
            cmd += ["-rtc", FIXED_RTC]
            if req.vcpus == 1:
                cmd += ["-icount", "shift=0,sleep=off"]
    if req.plugin is not None and accel == "tcg":
        cmd += ["-plugin", _plugin_arg(req.plugin, work / "plugin.jsonl", cache)]
    return cmd


def kernel_cmdline(req: BootRequest, accel: str) -> str:
    """perfab's options, the deterministic ones under TCG, then the request's (later ones win)."""
    parts = [BASE_CMDLINE]
    if req.deterministic and accel == "tcg":
        parts.append(DETERMINISTIC_CMDLINE)
    parts.append(req.cmdline)
    return " ".join(p for p in parts if p)


def boot(req: BootRequest) -> BootResult:
    """Boot ``req.kernel``, run the workload, power off; failures are in the result."""
    _check(req)
    cache = Path(req.cache_dir) if req.cache_dir else default_cache()
    known_syms = _cached_kallsyms(req.kernel, cache) if req.kallsyms else None
    workload = initramfs.Workload(argv=tuple(req.argv), cwd=req.cwd, env=tuple(req.env),
                                  files=tuple(req.files), kallsyms=req.kallsyms and known_syms is None)
    image = initramfs.build(workload, cache)
    accel = choose_accel(req)
    with tempfile.TemporaryDirectory(prefix="perfab-boot-") as tmp:
        work = Path(tmp)
        cmd = qemu_command(req, accel, image, work, cache)
        start = time.monotonic()
        code, timed_out, to_workload = _run_group(cmd, req.timeout_s, work / "qemu.stderr",
                                                  work / "console.log")
        host_wall = time.monotonic() - start
        res = _collect(req, work, accel, code, timed_out, host_wall, to_workload)
    if known_syms is not None:
        return replace(res, kallsyms=known_syms)
    if res.kallsyms and res.failure is None:
        initramfs._write_atomic(_kallsyms_path(req.kernel, cache), res.kallsyms)
    return res


def _kallsyms_path(kernel: str, cache: Path) -> Path:
    return cache / f"kallsyms-{hashlib.sha256(Path(kernel).read_bytes()).hexdigest()[:20]}.txt"


def _cached_kallsyms(kernel: str, cache: Path) -> bytes | None:
    """The text symbols a guest of this kernel sent before (addresses are fixed: nokaslr)."""
    try:
        return _kallsyms_path(kernel, cache).read_bytes()
    except OSError:
        return None


def _run_group(cmd: list[str], timeout_s: float, stderr_path: Path,
               console: Path | None = None) -> tuple[int | None, bool, float | None]:
    """Run ``cmd`` in its own process group; kill the group past ``timeout_s``.

    Returns (exit code or None, timed out, seconds until ``console`` showed the
    workload starting or None)."""
    watch = _ConsoleWatch(console)
    with open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                    start_new_session=True)
        except OSError as e:
            raise ToolError(f"cannot start {cmd[0]}: {e.strerror}; install qemu-system-x86") from e
        start = time.monotonic()
        try:
            while True:
                left = timeout_s - (time.monotonic() - start)
                if left <= 0:
                    _kill_group(proc)
                    return None, True, watch.seen_s
                try:
                    return proc.wait(timeout=min(left, 0.05)), False, watch.seen_s
                except subprocess.TimeoutExpired:
                    watch.poll(time.monotonic() - start)
        except BaseException:
            _kill_group(proc)
            raise


class _ConsoleWatch:
    """Notes when the console first shows the workload starting."""

    def __init__(self, path: Path | None):
        self.path = path  # the console file, None when not watched
        self.seen_s: float | None = None  # seconds from QEMU's start to the workload's
        self._offset = 0  # bytes of the console already read

    def poll(self, elapsed_s: float) -> None:
        if self.path is None or self.seen_s is not None:
            return
        start = max(0, self._offset - len(WORKLOAD_START))  # overlap: the line may straddle reads
        try:
            with open(self.path, "rb") as f:
                f.seek(start)
                chunk = f.read()
        except OSError:
            return
        if WORKLOAD_START in chunk:
            self.seen_s = elapsed_s
        self._offset = start + len(chunk)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


# ---- results ------------------------------------------------------------

def _collect(req: BootRequest, work: Path, accel: str, code: int | None, timed_out: bool,
             host_wall: float, to_workload: float | None) -> BootResult:
    console = _read_text(work / "console.log")
    tail = "\n".join(console.splitlines()[-TAIL_LINES:])
    sections = parse_sections(_read_bytes(work / "result.bin"))
    records = tuple(tcg.read_records(work / "plugin.jsonl")) if req.plugin and accel == "tcg" else ()
    status, wall = _parse_status(sections.get("status", b""))
    failure = _failure(sections, status, console, code, timed_out, req.timeout_s,
                       _read_text(work / "qemu.stderr"))
    return BootResult(
        status=status if failure is None else None,
        stdout=sections.get("stdout", b""), stderr=sections.get("stderr", b""),
        guest_wall_s=wall, host_wall_s=host_wall, to_workload_s=to_workload, accel=accel,
        vcpus_seen=_int_or_none(sections.get("cpus", b"")),
        failure=failure, console_tail=tail, records=records, kallsyms=sections.get("kallsyms", b""),
        deltas={**interrupt_deltas(sections.get("irq0", b""), sections.get("irq1", b"")),
                **vmstat_deltas(sections.get("vm0", b""), sections.get("vm1", b""))})


def _read_text(path: Path) -> str:
    return _read_bytes(path).decode("utf-8", "replace").replace("\r\n", "\n")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def parse_sections(blob: bytes) -> dict[str, bytes]:
    """The result channel's sections: ``PERFAB-SECTION NAME LEN\\n`` + LEN bytes + ``\\n``.

    Stops at ``PERFAB-END``; a cut-off channel yields the sections complete before the cut,
    and ``"end"`` is present only when the channel was complete."""
    out: dict[str, bytes] = {}
    pos = 0
    while pos < len(blob):
        nl = blob.find(b"\n", pos)
        if nl < 0:
            break
        head = blob[pos:nl].split()
        if head == [b"PERFAB-END"]:
            out["end"] = b""
            break
        if len(head) != 3 or head[0] != b"PERFAB-SECTION" or not head[2].isdigit():
            break
        size = int(head[2])
        if nl + 1 + size > len(blob):
            break
        out[head[1].decode()] = blob[nl + 1: nl + 1 + size]
        pos = nl + 1 + size + 1
    return out


def _parse_status(blob: bytes) -> tuple[int | None, float | None]:
    status = wall = None
    for line in blob.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        try:
            if key == "status":
                status = int(value)
            elif key == "wall_s":
                wall = float(value)
        except ValueError:
            pass
    return status, wall


def _int_or_none(blob: bytes) -> int | None:
    try:
        return int(blob.strip())
    except ValueError:
        return None


def _failure(sections: dict[str, bytes], status: int | None, console: str, code: int | None,
             timed_out: bool, timeout_s: float, qemu_err: str) -> str | None:
    """One line saying why the run failed, or None when the workload ran to its end."""
    if "end" in sections and status is not None:
        return None
    panic = next((ln.strip() for ln in console.splitlines() if "Kernel panic" in ln), None)
    if panic:
        return f"the guest kernel panicked: {panic}"
    if timed_out:
        stage = _stage(console)
        return f"the guest did not finish within {timeout_s:g} s ({stage}); see the console tail"
    if "workload start" in console and "workload done" not in console:
        return "the guest stopped during the workload; see the console tail"
    if "perfab: init reached" not in console:
        err = qemu_err.strip().splitlines()[-1:] if qemu_err.strip() else []
        why = f": {err[0]}" if err else ""
        return f"the guest never reached perfab's init (qemu exit {code}){why}"
    if "workload done" in console:
        return "the guest's result channel was cut short; see the console tail"
    return f"the guest stopped before the workload (qemu exit {code}); see the console tail"


def _stage(console: str) -> str:
    if "workload done" in console:
        return "after the workload, sending the result"
    if "workload start" in console:
        return "during the workload"
    if "perfab: init reached" in console:
        return "in perfab's init, before the workload"
    return "before perfab's init: the kernel did not finish booting"


def _counters(blob: bytes, parse) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in blob.decode("utf-8", "replace").splitlines():
        item = parse(line)
        if item:
            out[item[0]] = item[1]
    return out


def _irq_line(line: str) -> tuple[str, int] | None:
    name, sep, rest = line.partition(":")
    if not sep or not name.strip() or name.strip().startswith("CPU"):
        return None
    total = 0
    for token in rest.split():
        if not token.isdigit():
            break
        total += int(token)
    return f"irq.{name.strip()}", total


def _vmstat_line(line: str) -> tuple[str, int] | None:
    parts = line.split()
    if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
        return None
    return f"vmstat.{parts[0]}", int(parts[1])


def interrupt_deltas(before: bytes, after: bytes) -> dict[str, int]:
    """``irq.NAME`` -> count over the workload, summed over CPUs (``/proc/interrupts``)."""
    a, b = _counters(before, _irq_line), _counters(after, _irq_line)
    return {k: b[k] - a.get(k, 0) for k in b}


def vmstat_deltas(before: bytes, after: bytes) -> dict[str, int]:
    """``vmstat.NAME`` -> change over the workload (``/proc/vmstat``)."""
    a, b = _counters(before, _vmstat_line), _counters(after, _vmstat_line)
    return {k: b[k] - a.get(k, 0) for k in b}
