"""Kernel configurations: the options a side asks for and what Kconfig made of them.

A side's configuration is a base (``tinyconfig``, ``defconfig`` or a
``.config`` file) plus options (``{"PARAVIRT_SPINLOCKS": "n"}``).  perfab
writes the options over the base and lets ``make olddefconfig`` resolve
them; the resolved ``.config`` is what is built and what the build cache is
keyed by.  Two checks run before anything is built:

- every option names a symbol some ``Kconfig`` file of the tree defines
  (``config NAME`` / ``menuconfig NAME``), else the name is a typo;
- every option came out of ``olddefconfig`` as asked.  One that was dropped
  or changed is named with the reason read from its Kconfig entry: the
  ``depends on`` that is not met, the option that ``select``s it, a prompt
  that is hidden, or a ``range``.

This module reads Kconfig files the way ``grep`` would, one file at a time,
with the ``if``/``menu``/``choice`` blocks of that file; conditions that
come from a ``source`` in another file are not seen, and the explanation
then points at the entry's file and line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

# Options perfab adds to a ``tinyconfig`` base so the guest boots, runs a
# workload on every vCPU and powers off (the side's own options win):
BOOT_OPTIONS: dict[str, str] = {
    "64BIT": "y",
    "PRINTK": "y", "TTY": "y", "SERIAL_8250": "y", "SERIAL_8250_CONSOLE": "y",  # console on ttyS0
    "BLK_DEV_INITRD": "y", "RD_GZIP": "y",  # the workload arrives as a gzip initramfs
    "BINFMT_ELF": "y", "BINFMT_SCRIPT": "y",
    "PROC_FS": "y", "SYSFS": "y", "DEVTMPFS": "y", "DEVTMPFS_MOUNT": "y", "SHMEM": "y", "TMPFS": "y",
    "FUTEX": "y", "SMP": "y", "NR_CPUS": "8",
    # Without ACPI the kernel reads SeaBIOS's MP table, which lists the boot CPU
    # alone (1 of 2 vCPUs), and `poweroff -f` halts instead of switching the
    # machine off (no pm_power_off): QEMU then never exits.  ACPI without PCI
    # reads the MADT (both CPUs) but cannot load QEMU's DSDT ("AE_BAD_PARAMETER,
    # During Region initialization": its regions are in PCI config space), so
    # there is no _S5 and power-off still halts.
    "ACPI": "y", "PCI": "y",
}

# What installed programs and servers expect of a kernel, which tinyconfig leaves out:
# the system calls of a distribution's userland (users and groups, POSIX timers, epoll,
# signalfd/timerfd/eventfd, AIO, SysV IPC, file locks, inotify, rseq, madvise), IPv4 and
# Unix sockets with the loopback device (a server and its client talk over 127.0.0.1 in
# the guest), and the per-task accounting a server's usage is read from
# (/proc/PID/schedstat: SCHED_INFO through TASK_DELAY_ACCT; /proc/PID/io: TASK_IO_ACCOUNTING).
USERLAND_OPTIONS: dict[str, str] = {
    "MULTIUSER": "y", "POSIX_TIMERS": "y", "HIGH_RES_TIMERS": "y", "EPOLL": "y", "SIGNALFD": "y",
    "TIMERFD": "y", "EVENTFD": "y", "AIO": "y", "ADVISE_SYSCALLS": "y", "MEMBARRIER": "y", "FHANDLE": "y",
    "FILE_LOCKING": "y", "SYSVIPC": "y", "INOTIFY_USER": "y", "RSEQ": "y", "CROSS_MEMORY_ATTACH": "y",
    "NET": "y", "INET": "y", "UNIX": "y",
    "TASKSTATS": "y", "TASK_DELAY_ACCT": "y", "TASK_XACCT": "y", "TASK_IO_ACCOUNTING": "y",
}

# The host's root filesystem in the guest (``root = "host"``): virtio-9p read-only, an
# overlay with a tmpfs on top for writes.
HOST_ROOT_OPTIONS: dict[str, str] = {
    "VIRTIO_MENU": "y", "VIRTIO_PCI": "y", "NETWORK_FILESYSTEMS": "y", "NET_9P": "y", "NET_9P_VIRTIO": "y",
    "9P_FS": "y", "OVERLAY_FS": "y",
}

# Every option perfab adds to a tinyconfig, in the order above.
GUEST_OPTIONS: dict[str, str] = {**BOOT_OPTIONS, **USERLAND_OPTIONS, **HOST_ROOT_OPTIONS}

_ENTRY = re.compile(r"^\s*(menuconfig|config)\s+([A-Za-z0-9_]+)\s*$")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_TYPES = ("bool", "tristate", "int", "hex", "string", "def_bool", "def_tristate")


@dataclass(frozen=True)
class Entry:
    """One ``config``/``menuconfig`` entry of a Kconfig file."""

    name: str  # the symbol, without CONFIG_
    where: str  # file:line relative to the tree
    kind: str  # bool, tristate, int, hex or string ("" if the entry gives none)
    depends: tuple[str, ...]  # `depends on` expressions, the enclosing `if`s and menus included
    prompt_if: tuple[str, ...]  # conditions on its prompts; () with no condition
    has_prompt: bool  # the user can set it (else it follows defaults and selects)
    ranges: tuple[str, ...]  # `range` lines, as written


@dataclass
class Kconfig:
    """Every symbol a tree's Kconfig files define, and who selects whom."""

    entries: dict[str, list[Entry]] = field(default_factory=dict)  # symbol -> its definitions
    selected_by: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # symbol -> (selector, if-expr)

    def kind(self, name: str) -> str:
        """The symbol's type from the first definition that gives one."""
        return next((e.kind for e in self.entries.get(name, ()) if e.kind), "")


def read_kconfig(tree: Path) -> Kconfig:
    """Scan every ``Kconfig*`` file under ``tree`` (Documentation excluded)."""
    out = Kconfig()
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if not (dirpath == str(tree) and d in ("Documentation", ".git")))
        for name in sorted(filenames):
            if name.startswith("Kconfig"):
                path = Path(dirpath) / name
                _read_file(path, str(path.relative_to(tree)), out)
    return out


def _indent(line: str) -> int:
    return len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())


def _read_file(path: Path, rel: str, out: Kconfig) -> None:
    """Add one file's entries to ``out``, tracking its if/menu/choice blocks."""
    blocks: list[list[str]] = []  # enclosing conditions, one list per open block
    entry: dict | None = None
    help_indent: int | None = -1  # -1: not in help text
    for number, raw in _lines(path):
        if help_indent != -1:
            if not raw.strip():
                continue
            if help_indent is None or _indent(raw) >= help_indent:
                help_indent = help_indent if help_indent is not None else _indent(raw)
                continue
            help_indent = -1
        line = raw.split("#", 1)[0].strip() if '"' not in raw else raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        rest = rest.strip()
        if m := _ENTRY.match(line):
            _finish(entry, out)
            entry = {"name": m.group(2), "where": f"{rel}:{number}", "kind": "",
                     "depends": [c for b in blocks for c in b], "prompt_if": [], "has_prompt": False, "ranges": []}
            continue
        if word in ("help", "---help---"):
            help_indent = None
            continue
        if word == "if":
            _finish(entry, out)
            entry = None
            blocks.append([rest])
        elif word in ("menu", "choice"):
            _finish(entry, out)
            entry = None
            blocks.append([])
        elif word in ("endif", "endmenu", "endchoice"):
            _finish(entry, out)
            entry = None
            if blocks:
                blocks.pop()
        elif word in ("comment", "source", "rsource", "osource", "orsource", "mainmenu"):
            _finish(entry, out)
            entry = None
        elif line.startswith("depends on "):
            target = entry["depends"] if entry is not None else (blocks[-1] if blocks else None)
            if target is not None:
                target.append(line[len("depends on "):].strip())
        elif entry is not None:
            _entry_line(entry, word, rest, out)
    _finish(entry, out)


def _lines(path: Path):
    """(line number, text) pairs with backslash-continued lines joined."""
    pending, start = "", 0
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        yield start, pending + raw
        pending = ""
    if pending:
        yield start, pending


def _entry_line(entry: dict, word: str, rest: str, out: Kconfig) -> None:
    """One attribute line inside a config entry: its type, prompt, select or range."""
    if word in _TYPES:
        entry["kind"] = word.replace("def_", "")
        if word in ("bool", "tristate", "int", "hex", "string") and rest.startswith('"'):
            _prompt(entry, rest)
    elif word == "prompt":
        _prompt(entry, rest)
    elif word == "select":
        target, _, cond = rest.partition(" if ")
        out.selected_by.setdefault(target.strip(), []).append((entry["name"], cond.strip()))
    elif word == "range":
        entry["ranges"].append(rest)


def _prompt(entry: dict, rest: str) -> None:
    entry["has_prompt"] = True
    m = re.match(r'^"(?:[^"\\]|\\.)*"\s*(?:if\s+(.*))?$', rest)
    if m and m.group(1):
        entry["prompt_if"].append(m.group(1).strip())


def _finish(entry: dict | None, out: Kconfig) -> None:
    if entry is not None:
        e = Entry(entry["name"], entry["where"], entry["kind"], tuple(entry["depends"]), tuple(entry["prompt_if"]),
                  entry["has_prompt"], tuple(entry["ranges"]))
        out.entries.setdefault(e.name, []).append(e)


def normalise(options) -> tuple[tuple[str, str], ...]:
    """Options as sorted (NAME, value) pairs: CONFIG_ prefixes dropped, True/False as y/n, numbers as text."""
    pairs = []
    for name, value in dict(options).items():
        name = str(name).removeprefix("CONFIG_")
        if not _NAME.match(name):
            raise ValueError(f"kernel option name {name!r} is not a Kconfig symbol")
        if isinstance(value, bool):
            value = "y" if value else "n"
        pairs.append((name, str(value)))
    return tuple(sorted(pairs))


def unknown(options: tuple[tuple[str, str], ...], kconfig: Kconfig) -> list[str]:
    """The requested option names no Kconfig file of the tree defines."""
    return [name for name, _ in options if name not in kconfig.entries]


_VALUES = {"bool": (r"[yn]", 'takes "y" or "n"'), "tristate": (r"[ymn]", 'takes "y", "m" or "n"'),
           "int": (r"-?[0-9]+", "takes a decimal number"), "hex": (r"(0[xX])?[0-9a-fA-F]+", "takes a hex number")}


def bad_values(options: tuple[tuple[str, str], ...], kconfig: Kconfig) -> list[str]:
    """One sentence per option whose value its Kconfig type cannot hold (``SMP = "maybe"``): olddefconfig would
    drop it and the drop would be explained by the wrong cause."""
    out = []
    for name, value in options:
        kind = kconfig.kind(name)
        if kind in _VALUES and not re.fullmatch(_VALUES[kind][0], value):
            article = "an" if kind == "int" else "a"
            out.append(f'{name} = "{value}": {name} is {article} {kind} option, which {_VALUES[kind][1]}')
    return out


def read_config(path: Path) -> dict[str, str]:
    """A ``.config`` as {NAME: value}: ``n`` for "is not set", strings unquoted."""
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        if m := re.match(r"^# CONFIG_([A-Za-z0-9_]+) is not set$", line):
            out[m.group(1)] = "n"
        elif m := re.match(r"^CONFIG_([A-Za-z0-9_]+)=(.*)$", line):
            value = m.group(2)
            if value.startswith('"') and value.endswith('"') and len(value) >= 2:
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            out[m.group(1)] = value
    return out


def write_options(path: Path, options: tuple[tuple[str, str], ...], kconfig: Kconfig) -> None:
    """Replace each option's line in the ``.config`` at ``path`` (or add it), typed by its Kconfig entry."""
    names = {name for name, _ in options}
    kept = [line for line in path.read_text(errors="replace").splitlines()
            if not (m := re.match(r"^(?:# )?CONFIG_([A-Za-z0-9_]+)[= ]", line)) or m.group(1) not in names]
    for name, value in options:
        kept.append(_line(name, value, kconfig.kind(name)))
    path.write_text("\n".join(kept) + "\n")


def _line(name: str, value: str, kind: str) -> str:
    if value == "n" and kind in ("bool", "tristate", ""):
        return f"# CONFIG_{name} is not set"
    if kind == "string":
        return f'CONFIG_{name}="' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"CONFIG_{name}={value}"


def same(asked: str, got: str | None, kind: str) -> bool:
    """Whether a resolved value is what was asked (absent counts as n; hex compares as numbers)."""
    got = "n" if got is None else got
    if kind == "hex":
        try:
            return int(asked, 16) == int(got, 16)
        except ValueError:
            return asked.lower() == got.lower()
    return asked == got


def changes(options: tuple[tuple[str, str], ...], resolved: dict[str, str], kconfig: Kconfig) -> list[str]:
    """One sentence per option that ``olddefconfig`` dropped or changed, with the reason."""
    out = []
    for name, asked in options:
        got = resolved.get(name)
        if same(asked, got, kconfig.kind(name)):
            continue
        what = "was dropped by olddefconfig" if got in (None, "n") else f"became {got} in olddefconfig"
        out.append(f"{name}={asked} {what}: {explain(name, asked, resolved, kconfig)}")
    return out


def explain(name: str, asked: str, resolved: dict[str, str], kconfig: Kconfig) -> str:
    """Why Kconfig did not keep ``name=asked``, read from the symbol's entries."""
    entries = _relevant(kconfig.entries.get(name, []))
    if not entries:
        return "no Kconfig entry for it applies to x86"
    for e in entries:
        unmet = [d for d in e.depends if evaluate(d, resolved) == 0]
        if unmet:
            return f"it depends on {' && '.join(unmet)}{_unset(unmet, resolved)} ({e.where})"
    if asked == "n":
        on = [s for s, cond in kconfig.selected_by.get(name, []) if resolved.get(s, "n") in ("y", "m")
              and (not cond or evaluate(cond, resolved) > 0)]
        if on:
            return f"it is selected by {', '.join(sorted(set(on)))}; turn those off too"
    e = entries[0]
    if not e.has_prompt:
        return f"it has no prompt, so it follows its default and selects ({e.where})"
    hidden = [c for c in e.prompt_if if evaluate(c, resolved) == 0]
    if hidden and len(hidden) == len(e.prompt_if):
        return f"its prompt is hidden unless {' || '.join(hidden)}, so it keeps its default ({e.where})"
    if e.ranges:
        return f"the value must be in range {'; '.join(e.ranges)} ({e.where})"
    return f"a condition outside its entry decides it; see {e.where}"


def _relevant(entries: list[Entry]) -> list[Entry]:
    """Definitions that can apply to an x86 build (other architectures' arch/ files left out)."""
    return [e for e in entries if not e.where.startswith("arch/") or e.where.startswith("arch/x86/")]


def _unset(exprs: list[str], resolved: dict[str, str]) -> str:
    names = sorted({s for x in exprs for s in re.findall(r"\b[A-Z][A-Z0-9_]*\b", x)
                    if s not in ("y", "n", "m") and resolved.get(s, "n") == "n"})
    return f" ({', '.join(names)} {'is' if len(names) == 1 else 'are'} not set)" if names else ""


_TOKEN = re.compile(r'\s*(\|\||&&|!=|<=|>=|[!=<>()]|"(?:[^"\\]|\\.)*"|[A-Za-z0-9_$.\-]+)')


def evaluate(expr: str, values: dict[str, str]) -> int:
    """A Kconfig expression in tristate logic (n=0, m=1, y=2) over resolved values.

    Grammar as in Documentation/kbuild/kconfig-language.rst: ``!``, ``&&``,
    ``||``, parentheses and the comparisons ``= != < > <= >=``.  A symbol
    with no value is n; text this reader cannot parse counts as met (2).
    """
    tokens = _TOKEN.findall(expr)
    try:
        value, rest = _or(tokens, values)
    except (IndexError, ValueError):
        return 2
    return value if not rest else 2


def _or(t: list[str], v: dict[str, str]) -> tuple[int, list[str]]:
    left, t = _and(t, v)
    while t and t[0] == "||":
        right, t = _and(t[1:], v)
        left = max(left, right)
    return left, t


def _and(t: list[str], v: dict[str, str]) -> tuple[int, list[str]]:
    left, t = _not(t, v)
    while t and t[0] == "&&":
        right, t = _not(t[1:], v)
        left = min(left, right)
    return left, t


def _not(t: list[str], v: dict[str, str]) -> tuple[int, list[str]]:
    if t[0] == "!":
        value, rest = _not(t[1:], v)
        return 2 - value, rest
    if t[0] == "(":
        value, rest = _or(t[1:], v)
        if not rest or rest[0] != ")":
            raise ValueError("unbalanced")
        return value, rest[1:]
    if len(t) >= 3 and t[1] in ("=", "!=", "<", ">", "<=", ">="):
        return _compare(_word(t[0], v), t[1], _word(t[2], v)), t[3:]
    return _tristate(_word(t[0], v)), t[1:]


def _word(token: str, v: dict[str, str]) -> str:
    if token.startswith('"'):
        return token[1:-1]
    if token in ("y", "n", "m") or re.match(r"^-?(0x)?[0-9a-fA-F]+$", token) and not token.isalpha():
        return token
    return v.get(token, "n")


def _tristate(value: str) -> int:
    return {"y": 2, "m": 1}.get(value, 0)


def _compare(a: str, op: str, b: str) -> int:
    try:
        x, y = int(a, 0), int(b, 0)
    except ValueError:
        x, y = a, b
    ok = {"=": x == y, "!=": x != y, "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]
    return 2 if ok else 0
