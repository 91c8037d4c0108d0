"""Guests that start from a saved state: a side's kernel boots once, and every run goes on from there.

What a guest does before its workload (the kernel's boot, perfab's init, the
CPUs brought online, modules loaded) is the same for every run of a side,
and under TCG with icount it is the same to the instruction.  So the guest
stops at the *snapshot point*, just before its init reads the run's request;
the first boot to get there saves the guest (QEMU's migration to a file,
``migrate "exec:cat > FILE"``: QEMU 7.2 has no ``file:`` URI) and goes on to
its own workload; every later run starts QEMU with ``-incoming "exec:cat
FILE"`` and goes on from the same instruction.

The point is one instruction, the same in every boot, because the guest
stops itself there: ``guestpoint.c`` writes to the pvpanic device and QEMU
(``-action panic=pause``) stops the vCPU right after that write.  A guest
stopped from the host (QMP ``stop``) would stop wherever its vCPU happened
to be, and each stop would be another guest state (its timers, its
jiffies): every run of a side would then carry the same offset from the
other side's, a difference with no spread that an exact test would call
certain.

What differs between runs (argv, env, cwd, the server, the symbols asked
for) reaches the stopped guest through QEMU's gdb stub: the ``M`` packet of
GDB's remote protocol writes the run's request (``initramfs.run_request``)
into the buffer of the process waiting at the point, through vCPU 0's page
tables (the process pinned itself there).  Writing memory while the guest is
stopped is synchronous: the guest finds its request in place, as a fresh
boot given the same request would.

Saved states are cached under ``<cache>/snapshots/`` by a key over what
decides the guest up to the point: the QEMU binary, its command line without
the plugin and per-boot paths (memory, vCPUs, kernel command line, the
initramfs named by its content), and the kernel image's bytes.  The plugin
reads the guest and changes nothing in it, so one saved state serves every
plugin model.  A boot that finds another saving the same key boots to the
point and goes on without saving.  The ``KEEP`` most recently used states
are kept, or as many as the session's boots need (``perfab.replication``:
each boot of each side is a saved guest of its own, its command line
carrying its perturbation), and any used in the last ``RECENT_S``: sessions
running side by side share the cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from perfab.errors import UsageError
from perfab.kernel import qmp

FORMAT = 1  # changes when what a saved state holds, or how it is keyed, changes
KEEP = 8  # saved states kept per cache, the most recently used
MACHINE = ("-device", "pvpanic", "-action", "panic=pause")  # the guest stops itself at the point
CONTROL_QMP, CONTROL_GDB = "control.sock", "gdb.sock"  # in the boot's folder
LINE = re.compile(rb"perfab: snapshot point 0x([0-9a-f]+) (\d+)\r?\n")  # guestpoint.c: its buffer's address, size
GDB_CHUNK = 1024  # request bytes per M packet (QEMU's gdb stub takes packets of up to 4096 characters)
REQUEST_MAX = 1 << 20  # bytes the snapshot point's buffer takes (guestpoint.c)
BANDWIDTH = 1 << 34  # bytes/s: saving a stopped guest needs no throttle
SAVE_S = 120.0  # longest a save may take


class Failure(Exception):
    """Why a guest could not be taken through its snapshot point: the run fails with this line."""


def problem(accel: str, deterministic: bool) -> str | None:
    """Why guests of this kind boot for every run instead of starting from a snapshot, or None."""
    if accel != "tcg":
        return "under KVM a guest boots to its workload in about a second, and icount, which makes the saved " \
               "state the state every boot reaches, is TCG's"
    if not deterministic:
        return "without icount, the saved state would be one boot's, not the state every boot reaches"
    return None


def key(command: list[str], kernel: str) -> str:
    """The saved state's key: the QEMU binary (path, size, time), ``command`` (its machine, without per-boot
    paths or the plugin) and the kernel image's bytes."""
    binary = os.stat(command[0])
    digest = hashlib.sha256(json.dumps([FORMAT, command, binary.st_size, binary.st_mtime_ns]).encode())
    with open(kernel, "rb") as f:
        digest.update(f.read())
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class Saved:
    """Where a guest is saved in the cache (the files exist once it has been)."""

    key: str  # see ``key``
    state: Path  # QEMU's migration stream
    meta: Path  # JSON: the request buffer's address and size, when it was saved, the stream's bytes

    @classmethod
    def at(cls, cache: Path, key_: str) -> "Saved":
        where = cache / "snapshots"
        return cls(key_, where / f"{key_}.state", where / f"{key_}.json")

    def exists(self) -> bool:
        return self.state.is_file() and self.meta.is_file()

    def damage(self) -> str | None:
        """Why this saved guest cannot be restored though something is there (a directory where its state belongs,
        a meta file that is not its JSON), or None: nothing there, or a usable guest."""
        if not (self.state.exists() or self.meta.exists()):
            return None
        if not self.state.is_file() or not self.meta.is_file():
            return "its state or meta file is not a regular file"
        try:
            meta = json.loads(self.meta.read_text())
            int(meta["address"]), int(meta["size"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            return f"its meta file is unreadable ({e.__class__.__name__})"
        return None

    def drop(self) -> None:
        """Remove what is there of this saved guest (files or directories), so a boot saves it again."""
        import shutil

        for path in (self.state, self.meta):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


class Guide:
    """Takes one boot through the snapshot point, from the boot's wait loop (``step``): restores the saved guest or
    saves it there, gives it the run's request and lets it go on."""

    def __init__(self, work: Path, found: Saved, request: bytes, keep: int = KEEP):
        self.work, self.found, self.keep = work, found, max(keep, KEEP)
        self.blob = f"PERFAB-REQUEST {len(request)}\n".encode() + request  # what the guest is given
        if len(self.blob) > REQUEST_MAX:
            raise UsageError(f"the run's request is {len(self.blob):,} bytes, more than the {REQUEST_MAX:,} a guest "
                             "takes at its snapshot point; shorten the workload's arguments and environment, or set "
                             "measure.snapshot = false")
        damage = found.damage()
        if damage is not None:  # healed: dropped, and this boot saves it again
            found.drop()
        self.restore = found.exists()  # start from the saved guest; False: boot to the point
        self.start = "restored" if self.restore else "booted"  # "restored", "saved" or "booted" (not saved)
        self.passed = False  # the guest went on from the point
        self._loaded = False  # the saved guest was loaded (a restore reached the point)
        self._session: qmp.Session | None = None
        self._lock = None if self.restore else _try_lock(found)
        self.note = "" if self.restore or self._lock is not None else "another boot was saving the same guest"
        if damage is not None:
            self.note = f"the saved guest {found.key[:12]} was damaged ({damage}): dropped, booted and saved again"

    def arguments(self) -> list[str]:
        """QEMU's options for this boot: the control sockets, and the saved guest to start from."""
        args = ["-qmp", f"unix:{self.work / CONTROL_QMP},server=on,wait=off",
                "-gdb", f"unix:{self.work / CONTROL_GDB},server=on,wait=off"]
        if self.restore:
            _touch(self.found.state)  # used: kept by the next prune
            args += ["-incoming", f"exec:cat {shlex.quote(str(self.found.state))}"]
        return args

    def step(self) -> None:
        """Once the guest is stopped at the point: save it (a first boot), give it the request, let it go on."""
        if self.passed or not self._connected():
            return
        status = self._ask("query-status")["status"]
        if status in ("running", "inmigrate", "prelaunch"):
            return
        if status != "guest-panicked":
            raise Failure(f"the guest stopped ({status}) before perfab's snapshot point; see the console tail")
        self._loaded = self.restore
        address, size = self._point()
        if self._lock is not None:
            self._save(address, size)
        self._deliver(address, size)
        self._ask("cont")
        self.passed = True
        self.close()

    def close(self) -> None:
        """Release the connection and the save lock; a restore that never reached the point drops the saved
        guest (a stream QEMU could not load), so the next run saves it again."""
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        if self.restore and not self._loaded:
            self.found.state.unlink(missing_ok=True)

    def unloaded(self, qemu_error: str | None) -> str | None:
        """Why the run failed when QEMU ended without loading the saved guest (the stream was dropped), else None."""
        if not self.restore or self._loaded:
            return None
        return (f"QEMU could not load the side's saved guest {self.found.key[:12]} ({qemu_error or 'no error line'}); "
                "it was dropped, and the next run boots and saves it again")

    def _connected(self) -> bool:
        if self._session is None:
            try:
                self._session = qmp.Session(self.work / CONTROL_QMP)
            except (OSError, ValueError):
                return False  # QEMU is not listening yet
        return True

    def _ask(self, command: str, **arguments):
        try:
            return self._session.execute(command, **arguments)
        except ValueError as e:
            raise Failure(f"QEMU's monitor failed at the snapshot point: {e}") from e

    def _point(self) -> tuple[int, int]:
        """The request buffer's address and size: printed on this boot's console, or saved with the guest."""
        if self.restore:
            meta = json.loads(self.found.meta.read_text())
            return int(meta["address"]), int(meta["size"])
        found = LINE.search((self.work / "console.log").read_bytes())
        if found is None:
            raise Failure("the guest stopped before perfab's snapshot point (a kernel panic, with the kernel's "
                          "pvpanic driver); see the console tail")
        return int(found.group(1), 16), int(found.group(2))

    def _save(self, address: int, size: int) -> None:
        """Save the stopped guest to the cache; a save QEMU refuses is noted, and the run goes on."""
        tmp = self.found.state.with_name(f".{self.found.state.name}.{os.getpid()}")
        try:
            self._ask("migrate-set-parameters", **{"max-bandwidth": BANDWIDTH})
            self._ask("migrate", uri=f"exec:cat > {shlex.quote(str(tmp))}")
            info = self._migration()
            if info.get("status") != "completed":
                self.note = f"QEMU could not save the guest: {info.get('error-desc') or info.get('status')}"
                return
            os.replace(tmp, self.found.state)
            _write_json(self.found.meta, {"format": FORMAT, "address": address, "size": size,
                                          "bytes": self.found.state.stat().st_size, "saved_at": time.time()})
            self.start = "saved"
            prune(self.found.state.parent, self.keep)
        except Failure as e:
            self.note = str(e)
        finally:
            tmp.unlink(missing_ok=True)

    def _migration(self) -> dict:
        deadline = time.monotonic() + SAVE_S
        while time.monotonic() < deadline:
            info = self._ask("query-migrate")
            if info.get("status") in ("completed", "failed", "cancelled"):
                return info
            time.sleep(0.02)
        return {"status": f"not done within {SAVE_S:g} s"}

    def _deliver(self, address: int, size: int) -> None:
        """Write the run's request into the waiting process's buffer over QEMU's gdb stub."""
        blob = self.blob
        if len(blob) > size:
            raise Failure(f"the run's request is {len(blob):,} bytes, more than the {size:,} the guest's snapshot "
                          "point takes")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(10.0)
                s.connect(str(self.work / CONTROL_GDB))
                for at in range(0, len(blob), GDB_CHUNK):
                    chunk = blob[at:at + GDB_CHUNK]
                    reply = _gdb_packet(s, f"M{address + at:x},{len(chunk):x}:{chunk.hex()}")
                    if reply != "OK":
                        raise Failure(f"QEMU's gdb stub did not write the run's request at {address + at:#x} "
                                      f"({reply})")
        except OSError as e:
            raise Failure(f"cannot give the guest its request over QEMU's gdb stub: {e}") from e


def _gdb_packet(s: socket.socket, body: str) -> str:
    """Send one packet of GDB's remote protocol (``$body#checksum``) and return the reply's body."""
    s.sendall(f"${body}#{sum(body.encode()) & 0xFF:02x}".encode())
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            raise OSError("the gdb stub closed the connection")
        got += chunk
        reply = re.search(rb"\$([^#]*)#[0-9a-fA-F]{2}", got)
        if reply is not None:
            s.sendall(b"+")
            return reply.group(1).decode(errors="replace")


def _try_lock(found: Saved) -> int | None:
    """The save lock of ``found``'s key (an open descriptor), or None when another boot holds it."""
    found.state.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(found.state.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _write_json(path: Path, body: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(body, indent=1) + "\n")
    os.replace(tmp, path)


RECENT_S = 2 * 3600.0  # a saved guest used this recently may be another session's boot: never pruned


def prune(where: Path, keep: int = KEEP, now: float | None = None) -> None:
    """Keep the ``keep`` most recently used saved guests under ``where``, and every one used within ``RECENT_S``:
    sessions running side by side share the cache, and one session's boots must not push out another's (its
    later runs would boot again); remove the others' files."""
    states = []
    for state in where.glob("*.state"):
        try:
            states.append((state.stat().st_mtime, state))
        except OSError:
            continue  # removed meanwhile
    now = time.time() if now is None else now
    for used, state in sorted(states, reverse=True)[keep:]:
        if now - used < RECENT_S:
            continue
        for path in (state, state.with_suffix(".json"), state.with_suffix(".lock")):
            path.unlink(missing_ok=True)
