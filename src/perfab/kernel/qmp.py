"""Reading a running guest's memory through QEMU's machine protocol (QMP), for what the kernel decides at boot.

The coherence model names the data lines it reports by kernel symbol; a
per-CPU variable has no address of its own in System.map, only an offset
into each CPU's per-CPU area, whose base the kernel chooses at boot and
keeps in ``__per_cpu_offset[]``.  ``read_words`` asks a guest's QMP socket
(``-qmp unix:PATH,server=on,wait=off``) for that array with the human
monitor's ``x /Ngx ADDR``, which reads guest virtual memory without
stopping the guest or changing its state (under ``-icount`` the counts
stay the same).  Any failure gives None: the lines are then left as
addresses.  ``Session`` keeps one connection for several commands: the
snapshot point's stop, save and go on (``perfab.kernel.snapshot``).
Format: QEMU's QMP specification (docs/interop/qmp-spec).
"""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

_WORD = re.compile(r"0x([0-9a-fA-F]+)")


def read_words(sock_path: Path, address: int, count: int, timeout_s: float = 5.0) -> tuple[int, ...] | None:
    """``count`` 64-bit words of guest virtual memory at ``address``, or None when QMP does not answer."""
    deadline = time.monotonic() + timeout_s
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(str(sock_path))
            reader = s.makefile("r", encoding="utf-8", errors="replace")
            _reply(reader, deadline, greeting=True)
            _send(s, {"execute": "qmp_capabilities"})
            _reply(reader, deadline)
            _send(s, {"execute": "human-monitor-command", "arguments": {"command-line": f"x /{count}gx {address:#x}"}})
            text = _reply(reader, deadline)
    except (OSError, ValueError):
        return None
    if not isinstance(text, str):
        return None
    words = [int(w, 16) for line in text.splitlines() if ":" in line for w in _WORD.findall(line.split(":", 1)[1])]
    return tuple(words[:count]) if len(words) >= count else None


def _send(s: socket.socket, message: dict) -> None:
    s.sendall(json.dumps(message).encode() + b"\n")


def _reply(reader, deadline: float, greeting: bool = False):
    """The next reply's ``return`` value (the greeting's ``QMP`` object), skipping asynchronous events."""
    while time.monotonic() < deadline:
        line = reader.readline()
        if not line:
            raise ValueError("QMP closed the connection")
        doc = json.loads(line)
        if greeting and "QMP" in doc:
            return doc["QMP"]
        if "error" in doc:
            raise ValueError(str(doc["error"]))
        if "return" in doc:
            return doc["return"]
    raise ValueError("QMP did not answer in time")


class Session:
    """One QMP connection for several commands; a failure (no answer, an error reply) raises ValueError."""

    def __init__(self, sock_path: Path, timeout_s: float = 10.0):
        self.timeout_s = timeout_s  # how long one command may take to answer
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout_s)
            self._sock.connect(str(sock_path))
            self._reader = self._sock.makefile("r", encoding="utf-8", errors="replace")
            _reply(self._reader, time.monotonic() + timeout_s, greeting=True)
            self.execute("qmp_capabilities")
        except (OSError, ValueError):
            self._sock.close()
            raise

    def execute(self, command: str, **arguments):
        """``command``'s ``return`` value."""
        try:
            _send(self._sock, {"execute": command, **({"arguments": arguments} if arguments else {})})
            return _reply(self._reader, time.monotonic() + self.timeout_s)
        except OSError as e:
            raise ValueError(f"QMP {command}: {e}") from e

    def close(self) -> None:
        self._sock.close()
