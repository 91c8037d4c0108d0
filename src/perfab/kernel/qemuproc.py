"""QEMU as a process group: started, watched, stopped whatever happens.

``run_group`` starts a command in its own session (so that killing its
group stops QEMU and whatever it started, ``exec:`` migration helpers
included), waits at most ``timeout_s`` and kills the group past it or when
the caller's code raises.  While it waits it notes when the console first
shows the workload starting and calls the caller's ``step`` (the snapshot
point's driver, ``perfab.kernel.snapshot``) about every 50 ms.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from perfab import scratch
from perfab.errors import ToolError

WORKLOAD_START = b"perfab: workload start"  # the init's console line before the launcher runs
POLL_S = 0.05  # how often the console is read and ``step`` called


def run_group(cmd: list[str], timeout_s: float, stderr_path: Path, console: Path | None = None, on_start=None,
              step=None) -> tuple[int | None, bool, float | None]:
    """Run ``cmd`` in its own process group; kill the group past ``timeout_s``; call ``on_start()`` once when
    ``console`` shows the workload starting, and ``step()`` at every poll (what it raises kills the group).

    Returns (exit code or None, timed out, seconds until ``console`` showed the
    workload starting or None)."""
    watch = ConsoleWatch(console, on_start)
    with open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                    start_new_session=True)
        except OSError as e:
            raise ToolError(f"cannot start {cmd[0]}: {e.strerror}; install qemu-system-x86") from e
        scratch.record_child(stderr_path.parent, proc.pid)  # its own session: a sweep stops it if we are killed
        start = time.monotonic()
        try:
            while True:
                left = timeout_s - (time.monotonic() - start)
                if left <= 0:
                    kill_group(proc)
                    return None, True, watch.seen_s
                try:
                    return proc.wait(timeout=min(left, POLL_S)), False, watch.seen_s
                except subprocess.TimeoutExpired:
                    watch.poll(time.monotonic() - start)
                    if step is not None:
                        step()
        except BaseException:
            kill_group(proc)
            raise


class ConsoleWatch:
    """Notes when the console first shows the workload starting."""

    def __init__(self, path: Path | None, on_start=None):
        self.path = path  # the console file, None when not watched
        self.on_start = on_start  # called once when the workload starts; None: nothing to do
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
            if self.on_start is not None:
                self.on_start()
        self._offset = start + len(chunk)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
