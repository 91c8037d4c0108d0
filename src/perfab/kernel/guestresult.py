"""What a guest sent back: the framed result channel, the console, /proc deltas.

The init (``perfab.kernel.initramfs``) writes sections to the second serial
port as ``PERFAB-SECTION NAME LEN\\n``, LEN raw bytes and a newline, then
``PERFAB-END``; its progress lines ("perfab: init reached", "perfab:
workload start", "perfab: workload done") on the console tell how far a
failed guest got.
"""

from __future__ import annotations

from pathlib import Path


def read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8", "replace").replace("\r\n", "\n")


def read_bytes(path: Path) -> bytes:
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


def parse_status(blob: bytes) -> tuple[int | None, float | None]:
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


def int_or_none(blob: bytes) -> int | None:
    try:
        return int(blob.strip())
    except ValueError:
        return None


def parse_service(blob: bytes) -> dict[str, dict[str, float]]:
    """The launcher's ``service`` section: ``before|after NAME VALUE ...`` per line, as {when: {NAME: VALUE}}."""
    out: dict[str, dict[str, float]] = {}
    for line in blob.decode("utf-8", "replace").splitlines():
        words = line.split()
        if len(words) < 3 or words[0] not in ("before", "after") or len(words) % 2 == 0:
            continue
        try:
            out[words[0]] = {words[i]: float(words[i + 1]) for i in range(1, len(words), 2)}
        except ValueError:
            continue
    return out


def failure(sections: dict[str, bytes], status: int | None, console: str, code: int | None,
             timed_out: bool, timeout_s: float, qemu_err: str) -> str | None:
    """One line saying why the run failed, or None when the workload ran to its end."""
    error = sections.get("error", b"").decode("utf-8", "replace").strip()
    if error:
        log = [ln.strip() for ln in sections.get("service.log", b"").decode("utf-8", "replace").splitlines()
               if ln.strip()]
        said = f"; the service's log ends: {log[-1][:300]}" if log else ""
        return error.splitlines()[0][:400] + said
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
        err = qemu_error(qemu_err)
        why = f": {err}" if err else ""
        return f"the guest never reached perfab's init (qemu exit {code}){why}"
    if "workload done" in console:
        return "the guest's result channel was cut short; see the console tail"
    return f"the guest stopped before the workload (qemu exit {code}); see the console tail"


def qemu_error(text: str) -> str | None:
    """QEMU's own error line (``qemu-system-x86_64: ...``, ``qemu: fatal: ...``), not the register dump after it;
    else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    own = [ln for ln in lines if ln.startswith(("qemu:", "qemu-system-"))]
    return (own or lines or [None])[0 if own else -1]


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
