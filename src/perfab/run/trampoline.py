"""The helper (``perfab-exec.c``) that keeps a workload's rusage its own and its leftovers contained.

Linux folds the RSS high-water mark of the process that calls exec into the
new program's maxrss (fs/exec.c, ``setmax_mm_hiwater_rss``), so a workload
spawned straight from perfab would report perfab's own peak RSS.  The helper
is a few hundred lines of C with three modes:

- the fork server (``ForkServer``), started once per executor: a run is one
  request and one reply on a socket.  It vforks a child that execs the
  workload on pipes it reads itself (the first ``cap`` bytes of each stream
  kept, the rest counted, the end of stderr kept), kills its process group
  at the timeout, and answers with the wait status, the rusage, the wall
  time (fork to exit), the output, and the readings around the run: the
  machine's ``/proc/stat`` counters before the fork and after the reap, and
  the CPU time perfab and the server used between them (for
  ``perfab.machine.busy``).  perfab sleeps in one blocking ``recv``
  meanwhile: no pipes, no poll, no second round trip in Python.  The
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
import math
import os
import shutil
import socket
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from perfab.machine.busy import CpuWindow, cpu_stat
from perfab.run.execution import Execution

SOURCE = Path(__file__).with_name("perfab-exec.c")
TAIL_BYTES = 4096  # the last bytes of stderr kept (where perf reports a signal death)
GRACE_S = 0.25  # how long the pipes are still read once the workload is reaped


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


@dataclass(frozen=True)
class Reply:
    """The fork server's answer for one run that started, as it came: ``execution`` reads it."""

    head: tuple[int, ...]  # the reply's int64 fields (``_REPLY``): status, rusage, counts, readings
    payload: bytes  # the bytes that follow them: stdout kept, stderr kept, then stderr's tail when it was cut

    @property
    def harness_known(self) -> bool:
        """The server read perfab's CPU time over the window itself."""
        return self.head[15] >= 0


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
FAILED, DONE = 2, 3
STAGES = {1: "exec", 2: "chdir", 3: "affinity", 4: "descriptors"}
STAT_FIELDS = 8  # user nice system idle iowait irq softirq steal
# kind, value, detail, wall_ns, utime_us, stime_us, maxrss_kb, nvcsw, nivcsw, timed_out, out_total, err_total,
# out_kept, err_kept, err_tail, harness_ns, then /proc/stat's counters before and after
_REPLY = struct.Struct(f"={16 + 2 * STAT_FIELDS}q")
_HEAD = struct.Struct("=7I2q")  # length of what follows, argc, envc, mask, cap and tail bytes, 0; timeout, grace ns
KILL_RUN = struct.pack("=I", 0xFFFFFFFF)  # kill the run in flight (skipped between runs)


class CannotStart(Exception):
    """The server could not start the workload: ``errno`` at ``stage``."""

    def __init__(self, errno: int, stage: str):
        super().__init__(errno, stage)
        self.errno, self.stage = errno, stage


class ServerGone(ConnectionError):
    """The server closed its end (it was killed) or answered out of turn."""


class NotSent(ServerGone):
    """The server was gone before a request reached it: nothing ran."""


class ForkServer:
    """One running perfab-exec, serving one run at a time over a socketpair.

    ``run`` sends a request (``encode_request``) and sleeps until the run's
    reply; ``kill`` (from a signal handler) asks the server to kill the run
    in flight.  ``close`` ends the server: at EOF on its socket it exits,
    killing the run in flight and everything it started.
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
        self.in_flight = False  # a request was sent whole and its reply is awaited: a kill may follow it

    def run(self, request: bytes) -> Reply:
        """Run one request to its end.  Raises CannotStart, or ServerGone when the server is dead (before the
        request: nothing ran) or dies during the run."""
        try:
            self.sock.sendall(request)
        except OSError as e:  # EPIPE, ECONNRESET: the server died
            raise NotSent(str(e)) from e
        self.in_flight = True
        try:
            head = _REPLY.unpack(self._recv(_REPLY.size))
            kind, value, detail = head[:3]
            if kind == FAILED:
                raise CannotStart(value, STAGES.get(detail, "exec"))
            if kind != DONE:
                raise ServerGone(f"perfab-exec answered {kind} for a run")
            out_n, err_n, tail_n = head[12:15]
            payload = self._recv(out_n + err_n + tail_n) if out_n + err_n + tail_n else b""
        finally:
            self.in_flight = False
        return Reply(head, payload)

    def kill(self) -> None:
        """Ask the server to kill the run in flight (safe in a signal handler; a no-op between runs)."""
        if self.in_flight and not self.closed:
            try:
                self.sock.send(KILL_RUN, socket.MSG_DONTWAIT)
            except OSError:
                pass

    def _recv(self, size: int) -> bytes:
        parts, got = [], 0
        while got < size:  # MSG_WAITALL may still return early at a signal
            try:
                part = self.sock.recv(size - got, socket.MSG_WAITALL)
            except ConnectionError as e:
                raise ServerGone(str(e)) from e
            if not part:
                raise ServerGone("perfab-exec exited")
            parts.append(part)
            got += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

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


def execution(reply: Reply, own_cpu_s: float) -> Execution:
    """The run the reply tells of; the window's harness time is ``own_cpu_s`` (perfab's, read around the exchange)
    where the server could not read it.  Decoded straight from the reply's fields: every run pays for this."""
    (_, status, _, wall_ns, utime_us, stime_us, rss_kb, nv, niv, timed_out, out_total, err_total, out_n, err_n,
     tail_n, harness_ns) = reply.head[:16]
    payload, window = reply.payload, None
    before, after = reply.head[16:16 + STAT_FIELDS], reply.head[16 + STAT_FIELDS:]
    if min(before) >= 0 and min(after) >= 0:
        window = CpuWindow(cpu_stat(before), cpu_stat(after), harness_ns / 1e9 if harness_ns >= 0 else own_cpu_s)
    err = payload[out_n:out_n + err_n]
    return Execution(status, wall_ns / 1e9, utime_us / 1e6, stime_us / 1e6, rss_kb, nv, niv, bool(timed_out),
                     payload[:out_n], err, out_total, err_total, stderr_tail=payload[out_n + err_n:] if tail_n
                     else err[-TAIL_BYTES:], window=window)


def encode_request(argv: list[str], env: dict[str, str] | bytes, cwd: str, cpus: set[int] | None,
                   cap_bytes: int = 0, timeout_s: float = 0.0, tail_bytes: int = TAIL_BYTES,
                   grace_s: float = GRACE_S) -> bytes:
    """One request in perfab-exec's format; ValueError naming a string exec could not take.

    ``env`` may be given already encoded by ``encode_env``; ``timeout_s`` 0 is none.
    """
    if not argv:
        raise ValueError("argv must not be empty")
    env_blob = env if isinstance(env, bytes) else encode_env(env)
    blob = b"".join(s + b"\0" for s in [os.fsencode(cwd), *map(os.fsencode, argv)])
    if blob.count(b"\0") != len(argv) + 1:
        raise ValueError(unusable_string(argv, {}, cwd) or "embedded null byte")
    mask = cpu_mask(cpus)
    size = _HEAD.size - 4 + len(mask) + len(blob) + len(env_blob)
    limits = (min(cap_bytes, 0xFFFFFFFF), tail_bytes, 0, _ns(timeout_s), _ns(grace_s))
    return _HEAD.pack(size, len(argv), env_blob.count(b"\0"), len(mask), *limits) + mask + blob + env_blob


def _ns(seconds: float) -> int:
    """Seconds as whole nanoseconds for the server (infinite or beyond 292 years: 0, none)."""
    return int(seconds * 1e9) if math.isfinite(seconds) and 0 < seconds < 9e9 else 0


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
