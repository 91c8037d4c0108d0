"""Read the per-symbol self time out of ``perf report`` text.

The recorder asks perf 6.1 for one machine-readable form (see
``REPORT_ARGS`` in ``perfab.profile.record``)::

    # Samples: 494  of event 'cpu-clock'
    # Overhead;      Period;     Samples;Shared Object    ;Symbol
     45.34% ; 224224224  ; 224        ;workload         ;[.] spin_user
     1.62%  ; 8008008    ; 8          ;[kernel.kallsyms];[k] read_zero

Comment lines start with ``#``; every other non-blank line is one
(shared object, symbol) entry.  A share is recomputed from the period column
(``100 * period / total period``) because the overhead column is rounded to
two decimals.

Metric keys are ``self.<event>:<level>.<symbol>``:

- ``<event>`` is the event perf actually sampled, read from the header (perf
  silently falls back from ``cycles`` to ``cpu-clock`` without a PMU), with
  its own modifiers (``:u``, ``:P``, ...) dropped.
- ``<level>`` is where the sample landed, perf's ``[k]``/``[.]`` marker
  spelled as a perf event modifier: ``k`` kernel, ``u`` user, ``gk``/``gu``
  guest kernel/user, ``h`` hypervisor.  It is part of the key because the
  kernel and a program may both have a symbol of the same name (the kernel's
  ``read_zero`` and the fixture workload's own ``read_zero``).
- ``<symbol>`` is perf's symbol name verbatim (``finish_task_switch.isra.0``).
  Addresses perf could not resolve (``0x00000000000047b5``, one entry per
  address) are summed into ``[<shared object>]``, e.g. ``[md5sum]``.

Entries that end up with the same key (a name defined in two shared objects)
are summed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfab.errors import ToolError

LEVELS = {"k": "k", ".": "u", "g": "gk", "u": "gu", "H": "h"}  # perf's marker -> key modifier

_EVENT = re.compile(r"^# Samples: \S+\s+of event '([^']+)'")
_ROW = re.compile(
    r"^\s*(?P<overhead>[\d.]+)%\s*;\s*(?P<period>\d+)\s*;\s*(?P<samples>\d+)\s*;"
    r"(?P<dso>[^;]*);\[(?P<level>.)\] (?P<symbol>.*)$"
)
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
NO_SAMPLES = "perf recorded no samples; run the workload longer or raise the sampling frequency"


@dataclass(frozen=True)
class SymbolShare:
    """One line of the report: a symbol's self time."""

    symbol: str  # perf's symbol name, or "[<dso>]" for unresolved addresses
    level: str  # "k", "u", "gk", "gu" or "h" (see LEVELS)
    dso: str  # shared object, as perf names it ("[kernel.kallsyms]", "libc.so.6")
    overhead_pct: float  # perf's own rounded overhead column, in percent
    period: int  # sum of the samples' periods (ns for cpu-clock)
    samples: int  # number of samples


@dataclass(frozen=True)
class ProfileReport:
    """Everything read from one ``perf report`` run."""

    event: str  # the sampled event as perf names it ("cpu-clock", "cycles:P")
    entries: tuple[SymbolShare, ...]  # one per report line, in report order

    @property
    def total_period(self) -> int:
        """The sum of all entries' periods."""
        return sum(e.period for e in self.entries)

    def self_shares(self) -> dict[str, float]:
        """Percent of the total period per ``self.<event>:<level>.<symbol>`` key."""
        total = self.total_period
        base = self.event.split(":", 1)[0]
        shares: dict[str, float] = {}
        for e in self.entries:
            key = f"self.{base}:{e.level}.{e.symbol}"
            shares[key] = shares.get(key, 0.0) + 100.0 * e.period / total
        return shares


def _entry(match: re.Match[str], where: str) -> SymbolShare:
    marker = match["level"]
    if marker not in LEVELS:
        raise ToolError(f"{where}: unknown perf level marker [{marker}]; update perfab.profile.parse.LEVELS")
    dso = match["dso"].strip()
    symbol = match["symbol"].rstrip()
    if _ADDRESS.match(symbol):
        symbol = dso if dso.startswith("[") else f"[{dso}]"
    return SymbolShare(
        symbol=symbol,
        level=LEVELS[marker],
        dso=dso,
        overhead_pct=float(match["overhead"]),
        period=int(match["period"]),
        samples=int(match["samples"]),
    )


def parse_report(text: str, where: str = "perf report") -> ProfileReport:
    """Parse ``perf report --stdio -F overhead,period,sample,dso,sym -t ';'`` output.

    ``where`` names the source in error messages.  Raises ``ToolError`` when
    the text holds no samples, several events, or a line of unknown shape.
    """
    events: list[str] = []
    entries: list[SymbolShare] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            if found := _EVENT.match(line):
                events.append(found[1])
            continue
        if not line.strip():
            continue
        match = _ROW.match(line)
        if match is None:
            raise ToolError(
                f"{where}: line {number} is not a perf report entry: {line[:60]!r}; "
                "perfab reads perf 6.1's 'perf report -t ;' output"
            )
        entries.append(_entry(match, where))
    if len(events) > 1:
        names = ", ".join(events)
        raise ToolError(f"{where}: holds {len(events)} events ({names}); record one event per profile")
    if not events or not entries or sum(e.period for e in entries) == 0:
        raise ToolError(f"{where}: {NO_SAMPLES}")
    return ProfileReport(event=events[0], entries=tuple(entries))
