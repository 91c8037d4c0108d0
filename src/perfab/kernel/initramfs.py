"""The initramfs a perfab guest boots: busybox, an init script and the workload.

The archive is a newc cpio (the format the kernel unpacks at boot, see
``Documentation/driver-api/early-userspace/buffer-format.rst``) written here
in Python, uncompressed by default so the guest spends no emulated time
inflating it.  It holds:

- ``/bin/busybox`` and links for the applets the init script uses;
- ``/init``, which mounts proc, sys and devtmpfs, brings online the CPUs
  the boot left offline (a deterministic SMP guest boots with ``maxcpus=1``,
  see ``perfab.kernel.qemu``), snapshots
  ``/proc/interrupts`` and ``/proc/vmstat``, runs ``perfab-guestrun`` (a
  static C launcher, ``guestrun.c``, that executes the plugin's start and
  stop markers around the workload), snapshots again, writes the framed
  result to the second serial port (``/dev/ttyS1`` in raw mode) and powers
  off; on request it also sends the kernel's text and data symbols from
  ``/proc/kallsyms`` (Debian ships a placeholder System.map);
- the workload's request (argv, env, cwd) under ``/.perfab/req``;
- the host files the workload needs at their own absolute paths: argv[0]
  when it is a host file, the extra files asked for, and for every dynamic
  ELF among them its shared libraries and loader as ``ldd`` names them.

The result channel carries sections framed as ``PERFAB-SECTION NAME LEN\\n``
followed by LEN raw bytes and a newline, then ``PERFAB-END``; kernel messages
stay on the first serial port, the console.

Archives are cached by content hash (``<cache>/initramfs-<sha>.cpio``),
written to a temporary file and renamed into place.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perfab.errors import ToolError, UsageError

GUESTRUN_SOURCE = Path(__file__).with_name("guestrun.c")
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "mount", "mkdir", "cat", "stty", "wc", "poweroff", "echo", "grep")
REQ_DIR = "/.perfab/req"
OUT_DIR = "/.perfab/out"
RESULT_TTY = "/dev/ttyS1"
SECTIONS = ("status", "stdout", "stderr", "irq0", "irq1", "vm0", "vm1", "cpus", "kallsyms")

INIT_SCRIPT = f"""#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin:/usr/local/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p {OUT_DIR}
mount -t tmpfs out {OUT_DIR}
R={OUT_DIR}
echo "perfab: init reached" > /dev/console
for c in /sys/devices/system/cpu/cpu*/online; do [ -f $c ] && [ "$(cat $c)" = 0 ] && echo 1 > $c; done
grep -c ^processor /proc/cpuinfo > $R/cpus
cat /proc/interrupts > $R/irq0
cat /proc/vmstat > $R/vm0
echo "perfab: workload start" > /dev/console
/bin/perfab-guestrun {REQ_DIR} $R/stdout $R/stderr
cp_status=$?
cat /proc/interrupts > $R/irq1
cat /proc/vmstat > $R/vm1
cat {REQ_DIR}/status > $R/status 2>/dev/null || echo "status launcher-$cp_status" > $R/status
echo "perfab: workload done" > /dev/console
[ -f {REQ_DIR}/kallsyms ] && grep ' [tTwWdDbBrRvV] ' /proc/kallsyms > $R/kallsyms
exec 3<>{RESULT_TTY}
stty -F {RESULT_TTY} raw -echo -opost
for f in {" ".join(SECTIONS)}; do
  [ -f $R/$f ] || : > $R/$f
  echo "PERFAB-SECTION $f $(wc -c < $R/$f)" >&3
  cat $R/$f >&3
  echo >&3
done
echo PERFAB-END >&3
exec 3>&-
echo "perfab: result sent" > /dev/console
poweroff -f
"""


@dataclass(frozen=True)
class Workload:
    """What the guest runs and the host files it needs."""

    argv: tuple[str, ...]  # the command; argv[0] found on the host is copied in
    cwd: str = "/"  # working directory inside the guest (created if absent)
    env: tuple[tuple[str, str], ...] = ()  # the workload's whole environment
    files: tuple[str, ...] = ()  # extra host files or directories, copied at their absolute paths
    kallsyms: bool = False  # also send back the guest kernel's text and data symbols (/proc/kallsyms)


@dataclass(frozen=True)
class _Entry:
    """One member of the archive."""

    path: str  # absolute path inside the guest
    mode: int  # st_mode: type and permission bits
    data: bytes  # file content, or the target of a symlink


def build(workload: Workload, cache: Path, compress: bool = False) -> Path:
    """The initramfs for ``workload``, from the cache when built before."""
    entries = _entries(workload, cache)
    blob = _cpio(entries)
    if compress:
        blob = gzip.compress(blob, compresslevel=6, mtime=0)
    digest = hashlib.sha256(blob).hexdigest()[:20]
    target = cache / f"initramfs-{digest}.cpio{'.gz' if compress else ''}"
    if not target.exists():
        write_atomic(target, blob)
    return target


def write_atomic(target: Path, blob: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".initramfs-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _entries(workload: Workload, cache: Path) -> list[_Entry]:
    """Every file of the archive; parents are added when written."""
    if not BUSYBOX.is_file():
        raise ToolError(f"{BUSYBOX} is missing: install busybox-static (make sysdeps)")
    files: dict[str, _Entry] = {}
    for path in _host_files(workload):
        _add_host_file(files, path)
    files["/bin/busybox"] = _Entry("/bin/busybox", 0o100755, BUSYBOX.read_bytes())
    for lib in _shared_libraries(str(BUSYBOX)):  # none for busybox-static
        _add_host_file(files, lib)
    for applet in APPLETS:
        files[f"/bin/{applet}"] = _Entry(f"/bin/{applet}", 0o120777, b"busybox")
    files["/bin/perfab-guestrun"] = _Entry("/bin/perfab-guestrun", 0o100755,
                                           guestrun_binary(cache).read_bytes())
    files["/init"] = _Entry("/init", 0o100755, INIT_SCRIPT.encode())
    for name, data in _request(workload).items():
        files[f"{REQ_DIR}/{name}"] = _Entry(f"{REQ_DIR}/{name}", 0o100644, data)
    dirs = {"/proc", "/sys", "/dev", "/tmp", "/root", OUT_DIR, _abs(workload.cwd)}
    for d in dirs:
        files.setdefault(d, _Entry(d, 0o040755, b""))
    return sorted(files.values(), key=lambda e: e.path)


def _abs(path: str) -> str:
    return os.path.normpath(path if path.startswith("/") else "/" + path)


def _request(workload: Workload) -> dict[str, bytes]:
    """The launcher's request files: NUL-terminated argv and env, and cwd."""
    if not workload.argv:
        raise UsageError("the guest workload has no command: give argv")
    for s in (*workload.argv, *(k + v for k, v in workload.env)):
        if "\0" in s:
            raise UsageError(f"a NUL byte in the guest workload's command or environment ({s!r}): remove it")
    env = [f"{k}={v}" for k, v in workload.env]
    if not any(k == "PATH" for k, _ in workload.env):
        env.append("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
    req = {
        "argv": b"".join(a.encode() + b"\0" for a in workload.argv),
        "env": b"".join(e.encode() + b"\0" for e in env),
        "cwd": _abs(workload.cwd).encode(),
    }
    if workload.kallsyms:
        req["kallsyms"] = b""
    return req


def _host_files(workload: Workload) -> list[str]:
    """Absolute host paths to copy: argv[0] when it is a host file, the extra files and ELF deps."""
    wanted: list[str] = []
    exe = _resolve_exe(workload)
    if exe:
        wanted.append(exe)
    for f in workload.files:
        p = f if f.startswith("/") else os.path.join(_abs(workload.cwd), f)
        if not os.path.exists(p):
            raise UsageError(f"guest file {f!r} does not exist on the host: fix the path in files")
        wanted.extend(_walk(os.path.normpath(p)))
    deps: list[str] = []
    for p in wanted:
        deps.extend(_shared_libraries(p))
    return list(dict.fromkeys(wanted + deps))


def _resolve_exe(workload: Workload) -> str | None:
    arg0 = workload.argv[0] if workload.argv else ""
    if "/" in arg0:
        p = arg0 if arg0.startswith("/") else os.path.join(_abs(workload.cwd), arg0)
        return os.path.normpath(p) if os.path.isfile(p) else None
    path = dict(workload.env).get("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
    found = shutil.which(arg0, path=path)
    if found and os.path.realpath(found) == os.path.realpath(BUSYBOX):
        return None
    return found


def _walk(path: str) -> list[str]:
    if not os.path.isdir(path):
        return [path]
    out = []
    for root, _dirs, names in os.walk(path):
        out.extend(os.path.join(root, n) for n in sorted(names))
    return out


def _shared_libraries(path: str) -> list[str]:
    """The libraries and loader a dynamic ELF needs, as ``ldd`` resolves them."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return []
        proc = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    libs = []
    for line in proc.stdout.splitlines():
        for token in line.split():
            if token.startswith("/") and os.path.exists(token):
                libs.append(token)
    return libs


def _add_host_file(files: dict[str, _Entry], path: str) -> None:
    try:
        st = os.stat(path)
        data = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read guest file {path}: {e.strerror}; fix its path or permissions") from e
    files[path] = _Entry(path, stat.S_IFREG | (st.st_mode & 0o7777), data)


def _cpio(entries: list[_Entry]) -> bytes:
    """A newc cpio of ``entries`` with their parent directories, ending in TRAILER!!!."""
    out = bytearray()
    seen: set[str] = set()
    ino = 1
    for e in entries:
        for parent in _parents(e.path):
            if parent not in seen:
                seen.add(parent)
                out += _member(parent, 0o040755, b"", ino)
                ino += 1
        if e.path in seen:
            continue
        seen.add(e.path)
        out += _member(e.path, e.mode, e.data, ino)
        ino += 1
    out += _member("TRAILER!!!", 0, b"", 0, relative=False)
    return bytes(out)


def _parents(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _member(path: str, mode: int, data: bytes, ino: int, relative: bool = True) -> bytes:
    name = (path.lstrip("/") if relative else path).encode() + b"\0"
    nlink = 2 if stat.S_ISDIR(mode) else 1
    fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name), 0)
    head = b"070701" + b"".join(b"%08X" % v for v in fields) + name
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def guestrun_binary(cache: Path) -> Path:
    """The static launcher, compiled from ``guestrun.c`` into ``cache`` on first use."""
    source = GUESTRUN_SOURCE.read_bytes()
    target = cache / f"perfab-guestrun-{hashlib.sha256(source).hexdigest()[:12]}"
    if target.exists():
        return target
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise ToolError("no C compiler to build the guest launcher: install gcc (make sysdeps)")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".perfab-guestrun-")
    os.close(fd)
    try:
        proc = subprocess.run([cc, "-O2", "-static", "-o", tmp, str(GUESTRUN_SOURCE)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise ToolError(f"cannot build the guest launcher statically ({proc.stderr.strip()[:200]}): "
                            "install the C library's static part (libc6-dev)")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
