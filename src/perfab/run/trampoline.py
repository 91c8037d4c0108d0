"""The helper (``perfab-exec.c``) that keeps a workload's rusage its own and its leftovers contained.

Linux folds the RSS high-water mark of the process that calls exec into the
new program's maxrss (fs/exec.c, ``setmax_mm_hiwater_rss``), so a workload
spawned straight from perfab would report perfab's own peak RSS.  The helper
is a few hundred lines of C with three modes:

- the fork server (``ForkServer``), started once per executor: for each run
  it vforks a child that execs the workload, and it answers on a socket
  with the child's pid, then its wait status, rusage and wall time (fork to
  exit).  perfab sleeps in a blocking ``recv`` meanwhile.  One exec per run
  instead of two keeps the harness's cost per run under a millisecond.  The
  server is a child subreaper: after each run it kills and reaps whatever
  the workload left behind, even processes that left its session.
- ``--rusage-out`` (``rusage_shim``, ``read_rusage``): run one command and
  write its rusage to a file.  Put innermost, under ``perf stat`` or a
  variant's ``wrap``, it reports the workload's rusage, not the wrapper's.
- ``--contain`` (``perfab.run.proctree``): hold a service and all it forks.

It is compiled on first use with the system C compiler into perfab's cache
directory, keyed by the source's hash; without a compiler perfab spawns the
workload directly and leaves max RSS out where it cannot be the workload's.
``unusable_string`` says why exec cannot take a command's strings.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SOURCE = Path(__file__).with_name("perfab-exec.c")


@dataclass(frozen=True)
class Report:
    """What the helper measured for the workload it ran."""

    wall_s: float  # from fork to the child's exit
    user_s: float  # the workload's user CPU time
    sys_s: float  # the workload's system CPU time
    max_rss_kb: int | None  # the workload's own peak RSS, KiB; None when it cannot be told from perfab's
    nvcsw: int  # voluntary context switches
    nivcsw: int  # involuntary context switches
    status: int | None = None  # the raw wait status (``read_rusage``); None where reported apart


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfab"


@lru_cache(maxsize=1)
def helper_path() -> str | None:
    """The compiled helper, building it if needed; None when no C compiler can."""
    source = SOURCE.read_bytes()
    target = cache_dir() / f"perfab-exec-{hashlib.sha256(source).hexdigest()[:12]}"
    if target.exists():
        return str(target)
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".perfab-exec-")
        os.close(fd)
        build = [cc, "-O2", "-o", tmp, str(SOURCE)]
        # Static when the C library allows it: no dynamic loader, a smaller process.
        if subprocess.run([*build, "-static"], capture_output=True, timeout=120).returncode != 0:
            subprocess.run(build, check=True, capture_output=True, timeout=120)
        os.replace(tmp, target)  # atomic: concurrent builders agree
    except (OSError, subprocess.SubprocessError):
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        return None
    return str(target)


def rusage_shim(argv: list[str], out_path: str | os.PathLike) -> list[str] | None:
    """``argv`` run through ``perfab-exec --rusage-out``; None when the helper cannot be built.

    The helper runs ``argv``, writes its rusage to ``out_path`` (``read_rusage``
    reads it) and exits with ``argv``'s exit status, or dies of its signal.
    """
    helper = helper_path()
    if helper is None:
        return None
    return [helper, "--rusage-out", os.fspath(out_path), "--", *argv]


def read_rusage(out_path: str | os.PathLike) -> Report | None:
    """What ``rusage_shim`` wrote; None when it wrote nothing (killed, or the command could not start)."""
    try:
        fields = [int(f) for f in Path(out_path).read_text().split()]
    except (OSError, ValueError):
        return None
    if len(fields) != 7:
        return None
    wall_ns, utime_us, stime_us, rss_kb, nv, niv, status = fields
    return Report(wall_ns / 1e9, utime_us / 1e6, stime_us / 1e6, rss_kb, nv, niv, status)


def unusable_string(argv: list[str], env: dict[str, str], cwd: str | None = None) -> str | None:
    """Why exec cannot take these strings, naming the one at fault; None when it can."""
    for i, arg in enumerate(argv):
        if "\0" in arg:
            return f"argv[{i}] {arg!r} contains a NUL byte"
    for key, value in env.items():
        if not key or "=" in key:
            return f"environment variable name {key!r} is empty or contains '='"
        if "\0" in key or "\0" in value:
            return f"environment variable {key!r} contains a NUL byte"
    if cwd and "\0" in cwd:
        return f"working directory {cwd!r} contains a NUL byte"
    return None


# Reply kinds and the stages a start can fail at (perfab-exec.c).
STARTED, FAILED, DONE = 1, 2, 3
STAGES = {1: "exec", 2: "chdir", 3: "affinity", 4: "descriptors"}
_REPLY = struct.Struct("=9q")  # kind, value, detail, wall_ns, utime_us, stime_us, maxrss_kb, nvcsw, nivcsw
_HEAD = struct.Struct("=4I")  # length of what follows, argc, envc, mask bytes


class CannotStart(Exception):
    """The server could not start the workload: ``errno`` at ``stage``."""

    def __init__(self, errno: int, stage: str):
        super().__init__(errno, stage)
        self.errno, self.stage = errno, stage


class ServerGone(ConnectionError):
    """The server closed its end (it was killed) or answered out of turn."""


class ForkServer:
    """One running perfab-exec, serving one run at a time over a socketpair.

    Per run: ``start`` sends the request and returns the workload's pid (it
    leads its own process group), ``finish`` sleeps until the wait status
    and the rusage arrive.  ``close`` ends the server: at EOF on its socket
    it exits, killing the run in flight and everything it started.
    """

    def __init__(self, path: str):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # subprocess, not posix_spawn: glibc's posix_spawn leaves its internal signals (32, 33)
            # ignored in the child, and every workload would inherit that.  Its own session: a ^C at
            # the terminal reaches perfab, not the server.
            self.proc = subprocess.Popen([path, str(theirs.fileno())], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         pass_fds=(theirs.fileno(),),
                                         start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.pid = self.proc.pid
        self.sock = ours
        self.closed = False
        self._env: tuple[dict[str, str] | None, bytes] = (None, b"")  # the last environment, encoded

    def start(self, argv: list[str], env: dict[str, str], cwd: str, cpus: set[int] | None,
              out_w: int, err_w: int) -> int:
        """Run ``argv``; its pid.  Raises CannotStart, or ServerGone when the server is dead."""
        if env != self._env[0]:  # the runner passes one environment per side: encode it once
            self._env = (dict(env), encode_env(env))
        data = encode_request(argv, self._env[1], cwd, cpus)
        try:
            sent = socket.send_fds(self.sock, [data], [out_w, err_w])
            if sent < len(data):
                self.sock.sendall(memoryview(data)[sent:])
        except OSError as e:  # EPIPE, ECONNRESET: the server died
            raise ServerGone(str(e)) from e
        kind, value, detail, *_ = self._reply()
        if kind == FAILED:
            raise CannotStart(value, STAGES.get(detail, "exec"))
        if kind != STARTED:
            raise ServerGone(f"perfab-exec answered {kind} to a start")
        return value

    def finish(self) -> tuple[int, Report]:
        """Sleep until the workload ends; its raw wait status and rusage."""
        kind, status, _, wall_ns, utime_us, stime_us, rss_kb, nv, niv = self._reply()
        if kind != DONE:
            raise ServerGone(f"perfab-exec answered {kind} for a finished run")
        return status, Report(wall_ns / 1e9, utime_us / 1e6, stime_us / 1e6, rss_kb, nv, niv)

    def _reply(self) -> tuple[int, ...]:
        data = b""
        while len(data) < _REPLY.size:  # MSG_WAITALL may still return early at a signal
            try:
                chunk = self.sock.recv(_REPLY.size - len(data), socket.MSG_WAITALL)
            except ConnectionError as e:
                raise ServerGone(str(e)) from e
            if not chunk:
                raise ServerGone("perfab-exec exited")
            data += chunk
        return _REPLY.unpack(data)

    def close(self, grace_s: float = 2.0) -> None:
        """Close the socket (the server exits at EOF) and reap it; SIGKILL it after ``grace_s``."""
        if self.closed:
            return
        self.closed = True
        self.sock.close()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def encode_request(argv: list[str], env: dict[str, str] | bytes, cwd: str, cpus: set[int] | None) -> bytes:
    """One request in perfab-exec's format; ValueError naming a string exec could not take.

    ``env`` may be given already encoded by ``encode_env``.
    """
    if not argv:
        raise ValueError("argv must not be empty")
    env_blob = env if isinstance(env, bytes) else encode_env(env)
    blob = b"".join(s + b"\0" for s in [os.fsencode(cwd), *map(os.fsencode, argv)])
    if blob.count(b"\0") != len(argv) + 1:
        raise ValueError(unusable_string(argv, {}, cwd) or "embedded null byte")
    mask = cpu_mask(cpus)
    size = _HEAD.size - 4 + len(mask) + len(blob) + len(env_blob)
    return _HEAD.pack(size, len(argv), env_blob.count(b"\0"), len(mask)) + mask + blob + env_blob


def encode_env(env: dict[str, str]) -> bytes:
    """``KEY=value\\0`` for each variable, as exec takes them; ValueError naming a bad one."""
    strings = []
    for key, value in env.items():
        k = os.fsencode(key)
        if not k or b"=" in k:
            raise ValueError(unusable_string([], {key: value}))
        strings.append(k + b"=" + os.fsencode(value))
    blob = b"".join(s + b"\0" for s in strings)
    if blob.count(b"\0") != len(strings):
        raise ValueError(unusable_string([], env) or "embedded null byte")
    return blob


def cpu_mask(cpus: set[int] | None) -> bytes:
    """The kernel's cpumask for ``cpus``: native unsigned longs, bit n for CPU n; empty for None."""
    if not cpus:
        return b""
    if min(cpus) < 0:
        raise ValueError(f"negative CPU number in {sorted(cpus)}")
    bits = 8 * struct.calcsize("@L")
    words = [0] * (max(cpus) // bits + 1)
    for cpu in cpus:
        words[cpu // bits] |= 1 << (cpu % bits)
    return struct.pack(f"@{len(words)}L", *words)
