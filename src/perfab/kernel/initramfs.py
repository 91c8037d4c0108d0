"""The initramfs a perfab guest boots: busybox, an init script and the workload.

The archive is a newc cpio (the format the kernel unpacks at boot, see
``Documentation/driver-api/early-userspace/buffer-format.rst``) written here
in Python, uncompressed by default so the guest spends no emulated time
inflating it.  It holds:

- ``/bin/busybox`` and links for the applets the init script uses;
- ``/init``, which mounts proc, sys and devtmpfs, brings online the CPUs
  the boot left offline (a deterministic SMP guest boots with ``maxcpus=1``,
  see ``perfab.kernel.qemu``), runs ``perfab-guestrun`` (a static C
  launcher, ``guestrun.c``, that starts the workload's server when it has
  one, copies ``/proc/interrupts`` and ``/proc/vmstat`` just before the
  plugin's start marker and just after its stop marker, runs the workload
  between them and reads the server's usage), has the launcher write the
  framed result to the second serial port (``/dev/ttyS1`` in raw mode,
  ``guestresult.c``) and powers off; on request it also sends the kernel's
  text and data symbols from ``/proc/kallsyms`` (Debian ships a placeholder
  System.map);
- the request (argv, env, cwd, the server's) under ``/.perfab/req`` and the
  launcher under ``/.perfab/bin``; a guest that starts from a snapshot
  (``Workload.snapshot``, see ``perfab.kernel.snapshot``) holds no request:
  its init stops at the snapshot point and is given the run's request there
  (``run_request``, a newc cpio the launcher unpacks);
- what the workload runs from, in one of two roots:

  - ``root = "initramfs"`` (the default): the host files the workload needs,
    copied in: argv[0] when it is a host file, the server's program, the
    extra files asked for, and for every dynamic ELF among them its shared
    libraries and loader as ``ldd`` names them.  The guest holds these bytes
    and nothing else, the same on every side.
  - ``root = "host"``: this machine's root filesystem, which QEMU shares
    read-only over virtio-9p (``perfabroot``); the init mounts it with an
    overlay whose upper layer is a tmpfs, so programs write where they
    expect and nothing reaches the host, and runs the launcher chrooted
    there.  Scripts, installed benchmarks and servers with their data and
    configuration run unchanged.  A kernel with 9p, virtio-pci and overlayfs
    as modules (Debian's) gets them in the archive, loaded first.

Paths a side's build gives (``{build}``, ``{src}``, a directory named after
the side) are *mapped* to one guest path for every side (``maps``): copied
there, or bind-mounted there over the host root, so two sides' workloads
run from paths of the same bytes whatever their build directories are
called, and their stacks start alike.

The result channel carries sections framed as ``PERFAB-SECTION NAME LEN\\n``
followed by LEN raw bytes and a newline, then ``PERFAB-END``; kernel messages
stay on the first serial port, the console.  A setup failure in the guest
(the host root cannot be mounted, the server never listens) is the
``error`` section's one line.

A run's perturbation (``perfab.replication``) is the request's ``perturb``
file: the bytes the launcher credits to the guest's random pool and the
iterations it spins before the start marker.

Archives are cached by content hash (``<cache>/initramfs-<sha>.cpio``),
written to a temporary file and renamed into place; an archive that holds a
run's own perturbation (a guest booted for that run) is written to the
boot's folder instead, as no other run boots it.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perfab.errors import ToolError, UsageError

GUESTRUN_SOURCES = tuple(Path(__file__).with_name(name) for name in ("guestrun.c", "guestpoint.c", "guestresult.c"))
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "mount", "mkdir", "cat", "stty", "wc", "poweroff", "echo", "grep", "chroot", "cp", "insmod",
           "tail", "sed")
REQ_DIR = "/.perfab/req"
OUT_DIR = "/.perfab/out"
BIN_DIR = "/.perfab/bin"
MODULE_DIR = "/.perfab/modules"
SNAPSHOT_FLAG = "/.perfab/snapshot"  # present: the init stops at the snapshot point and is given the run's request
RESULT_TTY = "/dev/ttyS1"
HOST_ROOT_TAG = "perfabroot"  # the 9p mount tag QEMU gives the host's root
SERVICE_LOG_BYTES = 4096  # the end of the server's log sent back
SECTIONS = ("status", "stdout", "stderr", "irq0", "irq1", "vm0", "vm1", "cpus", "kallsyms", "error", "service",
            "service.log")
ROOTS = ("initramfs", "host")
PREFETCH = ("/etc/ld.so.cache", "/etc/ld.so.preload", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
            "/etc/localtime")  # what the dynamic loader and libc read at start, read before the window too

INIT_SCRIPT = f"""#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin:/usr/local/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p {OUT_DIR}
mount -t tmpfs out {OUT_DIR}
R={OUT_DIR}
Q={REQ_DIR}
echo "perfab: init reached" > /dev/console
for c in /sys/devices/system/cpu/cpu*/online; do [ -f $c ] && [ "$(cat $c)" = 0 ] && echo 1 > $c; done
fail() {{ echo "$1" > $R/error; echo "perfab: $1" > /dev/console; }}
[ -f $Q/modules ] && while read -r m; do insmod {MODULE_DIR}/$m 2>>$R/insmod.log; done < $Q/modules
if [ -f {SNAPSHOT_FLAG} ]; then
  {BIN_DIR}/perfab-guestrun --snapshot-point 2>$R/point.log || fail "$(tail -n 1 $R/point.log)"
  echo "perfab: init reached the run's request" > /dev/console
fi
hostroot() {{
  mkdir -p /host /rw /newroot
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 {HOST_ROOT_TAG} /host 2>$R/mount.log || {{
    why="$(tail -n 1 $R/mount.log)$(tail -n 1 $R/insmod.log 2>/dev/null | sed 's/^/; /')"
    need="9P_FS, NET_9P_VIRTIO and VIRTIO_PCI built in, or as modules of its release on this machine"
    fail "the guest cannot mount the host's root over 9p ($why): its kernel needs $need"; return 1; }}
  mount -t tmpfs rw /rw && mkdir -p /rw/upper /rw/work
  mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot 2>$R/mount.log || {{
    fail "the guest cannot lay a tmpfs over the host's root ($(tail -n 1 $R/mount.log)): its kernel needs OVERLAY_FS"
    return 1; }}
  for d in proc sys dev; do mount --bind /$d /newroot/$d; done
  mkdir -p /newroot/.perfab
  cp -a {REQ_DIR} {BIN_DIR} /newroot/.perfab/
  mkdir -p /newroot{OUT_DIR}
}}
ROOT=/
if [ -f $Q/hostroot ]; then hostroot && ROOT=/newroot; fi
if [ -f $Q/maps ] && [ ! -f $R/error ]; then
  while IFS='|' read -r host guest; do
    mkdir -p "$ROOT$guest" && mount --bind "$ROOT$host" "$ROOT$guest" || fail "cannot show $host at $guest in the guest"
  done < $Q/maps
fi
rc=0
if [ ! -f $R/error ]; then
  echo "perfab: workload start" > /dev/console
  RUN="{BIN_DIR}/perfab-guestrun {REQ_DIR} {OUT_DIR}"
  if [ "$ROOT" = / ]; then $RUN; else chroot $ROOT $RUN; fi
  rc=$?
fi
[ "$ROOT" = / ] || cp $ROOT{OUT_DIR}/* $R/ 2>/dev/null
[ -f $R/status ] || [ -f $R/error ] || echo "status launcher-$rc" > $R/status
if [ -f $R/service.log ]; then
  tail -c {SERVICE_LOG_BYTES} $R/service.log > $R/service.tail && cp $R/service.tail $R/service.log
fi
echo "perfab: workload done" > /dev/console
read -r k < $Q/kallsyms; [ "$k" = 1 ] && grep ' [tTwWdDbBrRvVA] ' /proc/kallsyms > $R/kallsyms
{BIN_DIR}/perfab-guestrun --send $R {RESULT_TTY} {" ".join(SECTIONS)}
echo "perfab: result sent" > /dev/console
poweroff -f
"""


@dataclass(frozen=True)
class Service:
    """The server a workload talks to, started in the guest beside it."""

    argv: tuple[str, ...]  # the server's command (host paths, mapped like the workload's)
    cwd: str = "/"  # its working directory in the guest
    port: int | None = None  # wait until 127.0.0.1:port accepts in the guest; None: no wait
    ready_s: float = 10.0  # how long to wait for the port
    cpus: str | None = None  # CPU list the server is pinned to (the workload gets the others); None: not pinned


@dataclass(frozen=True)
class Workload:
    """What the guest runs and the host files it needs."""

    argv: tuple[str, ...]  # the command; argv[0] found on the host is copied in
    cwd: str = "/"  # working directory inside the guest (created if absent)
    env: tuple[tuple[str, str], ...] = ()  # the workload's whole environment
    files: tuple[str, ...] = ()  # extra host files or directories, copied at their absolute paths
    kallsyms: bool = False  # also send back the guest kernel's text, data and per-CPU symbols (/proc/kallsyms)
    service: Service | None = None  # a server started in the guest before the workload
    root: str = "initramfs"  # "initramfs": the needed files copied in; "host": this machine's root over 9p
    maps: tuple[tuple[str, str], ...] = ()  # (host directory, guest directory): shown at the guest path
    modules: tuple[str, ...] = ()  # host paths of kernel modules loaded first, in order (.ko, .ko.xz)
    snapshot: bool = False  # the archive holds no run's request: it comes at the snapshot point (run_request)
    entropy: bytes = b""  # credited to the guest's random pool before the workload (b"": fixed bytes)
    spin: int = 0  # iterations the launcher spins before the start marker

    @property
    def perturbed(self) -> bool:
        """The run carries a perturbation of its own (``perfab.replication``)."""
        return bool(self.entropy or self.spin)


@dataclass(frozen=True)
class _Entry:
    """One member of the archive."""

    path: str  # absolute path inside the guest
    mode: int  # st_mode: type and permission bits
    data: bytes  # file content, or the target of a symlink


def build(workload: Workload, cache: Path, compress: bool = False, into: Path | None = None) -> Path:
    """The initramfs for ``workload``, from the cache when built before; with ``into``, written there and not
    cached (an archive that holds one run's perturbation serves no other run)."""
    entries = _entries(workload, cache)
    blob = _cpio(entries)
    if compress:
        blob = gzip.compress(blob, compresslevel=6, mtime=0)
    digest = hashlib.sha256(blob).hexdigest()[:20]
    target = (into or cache) / f"initramfs-{digest}.cpio{'.gz' if compress else ''}"
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
    if workload.root not in ROOTS:
        raise UsageError(f"guest root {workload.root!r} is not one of {', '.join(ROOTS)}")
    files: dict[str, _Entry] = {}
    if workload.root == "initramfs":
        for path in _host_files(workload):
            _add_host_file(files, path, guest_path(path, workload.maps))
    files["/bin/busybox"] = _Entry("/bin/busybox", 0o100755, BUSYBOX.read_bytes())
    for applet in APPLETS:
        files[f"/bin/{applet}"] = _Entry(f"/bin/{applet}", 0o120777, b"busybox")
    files[f"{BIN_DIR}/perfab-guestrun"] = _Entry(f"{BIN_DIR}/perfab-guestrun", 0o100755,
                                                 guestrun_binary(cache).read_bytes())
    files["/init"] = _Entry("/init", 0o100755, INIT_SCRIPT.encode())
    for name, data in module_files(workload.modules).items():
        files[f"{MODULE_DIR}/{name}"] = _Entry(f"{MODULE_DIR}/{name}", 0o100644, data)
    request, dirs = _run_parts(workload)
    if workload.snapshot:
        request = {name: data for name, data in request.items() if name == "modules"}  # loaded before the point
        files[SNAPSHOT_FLAG] = _Entry(SNAPSHOT_FLAG, 0o100644, b"")
        dirs = set()
    for name, data in request.items():
        files[f"{REQ_DIR}/{name}"] = _Entry(f"{REQ_DIR}/{name}", 0o100644, data)
    for d in {"/proc", "/sys", "/dev", "/tmp", "/root", OUT_DIR, *dirs}:
        files.setdefault(d, _Entry(d, 0o040755, b""))
    return sorted(files.values(), key=lambda e: e.path)


def _run_parts(workload: Workload) -> tuple[dict[str, bytes], set[str]]:
    """What differs between runs: the launcher's request files, and the directories it runs in (initramfs root)."""
    dirs = set()
    if workload.root == "initramfs":
        dirs.add(_in_guest(workload.cwd, workload))
        if workload.service is not None:
            dirs.add(_in_guest(workload.service.cwd, workload, workload.cwd))
    return _request(workload), dirs


def run_request(workload: Workload) -> bytes:
    """The run's request for a guest that starts from a snapshot: a newc cpio the launcher unpacks at ``/`` at the
    snapshot point (the request files under ``/.perfab/req`` and the workload's directories); kernel modules stay
    in the archive."""
    request, dirs = _run_parts(workload)
    entries = [_Entry(f"{REQ_DIR}/{name}", 0o100644, data) for name, data in request.items() if name != "modules"]
    entries += [_Entry(d, 0o040755, b"") for d in dirs]
    return _cpio(sorted(entries, key=lambda e: e.path))


def _abs(path: str) -> str:
    return os.path.normpath(path if path.startswith("/") else "/" + path)


def guest_path(host: str, maps: tuple[tuple[str, str], ...]) -> str:
    """Where the absolute host path ``host`` appears in the guest: under a mapped directory's guest path."""
    for source, target in maps:
        if host == source or host.startswith(source.rstrip("/") + "/"):
            return os.path.normpath(target + host[len(source.rstrip("/")):])
    return host


def _in_guest(path: str, workload: Workload, cwd: str | None = None) -> str:
    """A path of the request as the guest sees it: absolute, and mapped when under a mapped directory."""
    base = cwd if cwd is not None else "/"
    return guest_path(os.path.normpath(os.path.join(base, path)), workload.maps)


def _guest_arg(arg: str, workload: Workload) -> str:
    """An argument naming a host path under a mapped directory, as the guest's path; others as given."""
    if "/" not in arg:
        return arg
    absolute = os.path.normpath(os.path.join(workload.cwd, arg))
    mapped = guest_path(absolute, workload.maps)
    return mapped if mapped != absolute else arg


def _strings(values, what: str) -> bytes:
    for s in values:
        if "\0" in s:
            raise UsageError(f"a NUL byte in the guest {what} ({s!r}): remove it")
    return b"".join(s.encode() + b"\0" for s in values)


def _request(workload: Workload) -> dict[str, bytes]:
    """The launcher's request files (argv, env, cwd, the server's), and what the init is asked to do."""
    if not workload.argv:
        raise UsageError("the guest workload has no command: give argv")
    env = [f"{k}={v}" for k, v in workload.env]
    if not any(k == "PATH" for k, _ in workload.env):
        env.append("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
    req = {
        "argv": _strings([_guest_arg(a, workload) for a in workload.argv], "workload's command"),
        "env": _strings(env, "workload's environment"),
        "cwd": _in_guest(workload.cwd, workload).encode(),
    }
    if workload.service is not None:
        req.update(_service_request(workload.service, workload))
    if workload.perturbed:
        req["perturb"] = f"spin {workload.spin}\nentropy {workload.entropy.hex()}\n".encode()
    req["kallsyms"] = b"1\n" if workload.kallsyms else b"0\n"  # a file either way: the run that fetches the
    # symbols leaves the same files in the guest before its workload as the runs that do not
    if workload.root == "host":
        req["hostroot"] = b""
        req["prefetch"] = _strings([*PREFETCH, *_host_files(workload)], "file list")
        if workload.maps:
            req["maps"] = "".join(f"{_map_text(a)}|{_map_text(b)}\n" for a, b in workload.maps).encode()
    if workload.modules:
        req["modules"] = "".join(f"{name}\n" for name in module_files(workload.modules)).encode()
    return req


def _map_text(path: str) -> str:
    if any(c in path for c in "|\n\0"):
        raise UsageError(f"the path {path!r} cannot be shown in the guest (it holds '|' or a newline): rename it")
    return path


def _service_request(svc: Service, workload: Workload) -> dict[str, bytes]:
    """The server's part of the request: command, directory, port, readiness deadline, CPUs."""
    if not svc.argv:
        raise UsageError("workload.service.argv is empty; name the server to start")
    cwd = _in_guest(svc.cwd, workload, workload.cwd)
    out = {"svc_argv": _strings([_guest_arg(a, workload) for a in svc.argv], "service's command"),
           "svc_cwd": cwd.encode(), "svc_ready_s": f"{svc.ready_s:g}".encode()}
    if svc.port is not None:
        out["svc_port"] = str(svc.port).encode()
    if svc.cpus:
        out["svc_cpus"] = svc.cpus.encode()
    return out


def _host_files(workload: Workload) -> list[str]:
    """Absolute host paths to copy: the programs (and a script's interpreter), the extra files, ELF deps."""
    wanted: list[str] = []
    cwd = _abs(workload.cwd)
    for argv, where in ((workload.argv, cwd),
                        *(((workload.service.argv, os.path.join(cwd, workload.service.cwd)),)
                          if workload.service else ())):
        exe = _resolve_exe(argv, where, workload.env)
        if exe:
            wanted.extend((exe, *_interpreter(exe)))
    for f in workload.files:
        p = os.path.join(cwd, f)
        if not os.path.exists(p):
            raise UsageError(f"guest file {f!r} does not exist on the host: fix the path in files")
        wanted.extend(_walk(os.path.normpath(p)))
    deps: list[str] = []
    for p in wanted:
        deps.extend(_shared_libraries(p))
    return list(dict.fromkeys(wanted + deps))


def _resolve_exe(argv: tuple[str, ...], cwd: str, env: tuple[tuple[str, str], ...]) -> str | None:
    arg0 = argv[0] if argv else ""
    if "/" in arg0:
        p = os.path.join(cwd, arg0)
        return os.path.normpath(p) if os.path.isfile(p) else None
    path = dict(env).get("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
    found = shutil.which(arg0, path=path)
    if found and os.path.realpath(found) == os.path.realpath(BUSYBOX):
        return None
    return found


def _interpreter(path: str) -> list[str]:
    """A script's interpreter (``#!/bin/bash``) when it is a host file: the guest needs it to run the script."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    words = head[2:].split(b"\n", 1)[0].split()
    if not words:
        return []
    interp = words[0].decode(errors="replace")
    return [interp] if os.path.isfile(interp) and os.path.realpath(interp) != os.path.realpath(BUSYBOX) else []


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


def _add_host_file(files: dict[str, _Entry], path: str, at: str | None = None) -> None:
    try:
        st = os.stat(path)
        data = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read guest file {path}: {e.strerror}; fix its path or permissions") from e
    at = at or path
    files[at] = _Entry(at, stat.S_IFREG | (st.st_mode & 0o7777), data)


def module_files(paths: tuple[str, ...]) -> dict[str, bytes]:
    """Kernel modules as the guest's ``insmod`` loads them: uncompressed ``NAME.ko``, in the given order."""
    out: dict[str, bytes] = {}
    for path in paths:
        name = os.path.basename(path)
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ToolError(f"cannot read kernel module {path}: {e.strerror}") from e
        if name.endswith(".xz"):
            data, name = lzma.decompress(data), name[:-3]
        elif name.endswith(".gz"):
            data, name = gzip.decompress(data), name[:-3]
        elif name.endswith(".zst"):
            data, name = _unzstd(path), name[:-4]
        out[name] = data
    return out


def _unzstd(path: str) -> bytes:
    done = subprocess.run(["zstd", "-dc", path], capture_output=True) if shutil.which("zstd") else None
    if done is None or done.returncode != 0:
        raise ToolError(f"cannot decompress kernel module {path}: install zstd")
    return done.stdout


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
    source = b"".join(p.read_bytes() for p in GUESTRUN_SOURCES)
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
        proc = subprocess.run([cc, "-O2", "-static", "-o", tmp, *map(str, GUESTRUN_SOURCES)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise ToolError(f"cannot build the guest launcher statically ({proc.stderr.strip()[:200]}): "
                            "install the C library's static part (libc6-dev)")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
