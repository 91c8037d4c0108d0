"""Which runs are independent draws, and the seeded perturbations that make them so.

A count that repeats exactly is one sample, not many: treating repeats of
one draw as replicates is pseudo-replication (Hurlbert, "Pseudoreplication
and the design of ecological field experiments", Ecol. Monogr. 1984).
Under deterministic emulation (QEMU's TCG with ``-icount``) every run
restored from one saved guest repeats that boot: its memory layout, the
phase of its timer and, with several vCPUs, its interleaving are one draw
of a chaotic system (Alameldeen & Wood, "Variability in Architectural
Simulations of Multi-threaded Workloads", HPCA 2003).  The unit of
replication is the level that varies (Kalibera & Jones, "Rigorous
Benchmarking in Reasonable Time", ISMM 2013):

- ``boot``: a guest side boots ``units`` times per session
  (``measure.boots``); the k-th measured run of a cell (side, workload,
  sweep point) goes on from boot ``k mod units``, restored from that boot's
  saved guest;
- ``build``: a side perfab builds is built ``units`` times, each build's code
  and data moved by a seeded pad (``perfab.run.layoutbuild``,
  ``experiment.layout_builds``); run k of a cell runs build ``k mod units``;
- ``run``: every run is its own draw (a process on real hardware, a guest
  booted for every run, a simulation with its own seeded layout).

Each boot and each run carries a seeded perturbation of the state that is
incidental to the comparison, after Alameldeen & Wood's small random
perturbations of a deterministic simulation:

- a boot gets a no-op word of random length and content on its kernel
  command line (``perfab_boot=...``): it moves the boot's timing and early
  memory layout, and Linux mixes the command line into its entropy pool
  (6.1's ``random_init(command_line)``), so every random choice made while
  booting (slab freelists, hash seeds) moves with it;
- a run gets its guest's random pool credited with seeded bytes before the
  workload starts (address-space layout, stack canaries and the
  per-system-call kernel stack offset follow it where the kernel
  randomises them), a seeded spin before the start marker (the phase of
  the timer tick when the workload starts) and a seeded pad of its
  environment (where its stack starts within a page; Mytkowicz et al.,
  "Producing wrong data without doing anything obviously wrong!", ASPLOS
  2009).  Under cachegrind a run's pad plays that part.

Every side draws the same seeds: boot b of each side has one command-line
word, and run k of each cell one entropy seed, spin and pad, so neither side
is handed a luckier layout.  The session's seed (``experiment.perturb_seed``,
else drawn when the session begins) is stored with it, and the same seed
makes the same perturbations again.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

BOOT, BUILD, RUN = "boot", "build", "run"  # the units of replication a session names
UNITS = (BOOT, BUILD, RUN)
BOOT_WORD = "perfab_boot"  # the kernel parameter that carries a boot's pad (unknown to Linux: init's environment)
BOOT_WORD_MAX = 64  # characters of the pad at most (at least 1)
PAD_MAX = 4095  # bytes of environment pad at most: the stack's offset within a page
SPIN_MAX = 1_200_000  # iterations of the launcher's spin at most: about one 4 ms tick of guest time under icount
ENTROPY_BYTES = 64  # bytes credited to a guest's random pool before its workload
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
SAVED_NOTE = "saved at the snapshot point"  # a run's note: its boot saved the guest (it paid for the boot)
RESTORED_NOTE = "restored from the side's saved guest"  # a run's note: its guest went on from a saved boot
POWERED_OFF = "powered off in"  # a guest run's note: "... powered off in 1.9 s", its host wall time

GUEST_PERTURBATIONS = ("a random no-op word on the kernel command line per boot",
                       "the guest's random pool seeded per run (ASLR, stack canaries, kernel stack offsets)",
                       "a random spin before the workload per run (timer phase)",
                       "a random environment pad per run (stack offset)")
HOST_PERTURBATIONS = ("a random environment pad per run (stack offset)",)


@dataclass(frozen=True)
class Replication:
    """How a session's runs relate to its independent draws, stored with the session's design."""

    unit: str  # "boot": runs restored from one of ``units`` boots per side; "run": every run is its own draw
    units: int  # boots per side and workload with unit "boot"; 1 with unit "run"
    seed: int  # the session's perturbation seed
    perturbations: tuple[str, ...] = ()  # what is perturbed, in words; () when nothing is

    def unit_of(self, rep: int) -> int:
        """The draw a cell's ``rep``-th run belongs to: its boot (warm-ups, ``rep < 0``, the first), or with unit
        "run" the run itself."""
        if self.unit == RUN:
            return rep
        return rep % self.units if rep >= 0 else 0

    @property
    def perturbed(self) -> bool:
        return bool(self.perturbations)

    def draw(self, workload: str, params: tuple, rep: int) -> "Draw | None":
        """The perturbation of a cell's ``rep``-th run; None when nothing is perturbed."""
        if not self.perturbed:
            return None
        unit = self.unit_of(rep)
        return Draw(unit, boot_word(self.seed, unit), run_draw(self.seed, workload, params, rep))

    def describe(self, runs: int | None = None, seed: str | None = None) -> str:
        """One line for the plan and the report: the units, the runs, what is perturbed, the seed (``seed``: in
        words, for a plan whose seed is drawn later)."""
        if self.unit == BOOT:
            each = f" x {_per_unit(runs, self.units)} runs" if runs else ""
            head = f"{self.units} boot{'s' if self.units != 1 else ''} per side{each}, every run going on from its " \
                   "boot's saved guest; verdicts take the boot as the unit"
        elif self.unit == BUILD:
            each = f" x {_per_unit(runs, self.units)} runs" if runs else ""
            head = f"{self.units} layout builds per side{each}; verdicts take the build as the unit"
        else:
            head = "every run is its own draw; verdicts take the run as the unit"
        what = f"; perturbed: {'; '.join(self.perturbations)}" if self.perturbations else "; nothing perturbed"
        return f"{head}{what}; seed {seed or self.seed}"

    def to_json(self) -> dict:
        return {"unit": self.unit, "units": self.units, "seed": self.seed,
                "perturbations": list(self.perturbations)}

    @classmethod
    def from_json(cls, doc: dict | None) -> "Replication | None":
        """A stored session's replication, None for a session stored before perfab recorded it (or damaged)."""
        if not isinstance(doc, dict) or doc.get("unit") not in UNITS:
            return None
        try:
            units, seed = int(doc.get("units") or 1), int(doc.get("seed") or 0)
        except (TypeError, ValueError):
            return None
        perturbed = doc.get("perturbations") or ()
        return cls(doc["unit"], max(1, units), seed, tuple(str(p) for p in perturbed if isinstance(p, str)))


def stored(design: dict | None) -> Replication:
    """The replication a stored session ran with (its design's); a session stored before perfab kept one had none:
    each run its own unit, nothing perturbed."""
    return Replication.from_json((design or {}).get("replication")) or Replication(RUN, 1, 0)


def with_builds(replication: Replication, builds: int, seed: int) -> Replication:
    """``replication`` with ``builds`` layout builds per side as its unit (``experiment.layout_builds``), their pads
    drawn from ``seed``; as it was with one build."""
    if builds <= 1:
        return replication
    offset = f"a random code, read-only data and data offset per build ({builds} builds per side)"
    return Replication(BUILD, builds, seed, (offset, *replication.perturbations))


def _per_unit(runs: int, units: int) -> str:
    """Runs per boot, as a count or a range (``3-4``) when the boots do not share the runs evenly."""
    low, high = runs // units, -(-runs // units)
    return str(low) if low == high else f"{low}-{high}"


def draw_seed() -> int:
    """A fresh session seed (31 bits: it reads well and fits every integer column)."""
    return secrets.randbits(31)


def _stream(*parts) -> bytes:
    """32 pseudo-random bytes, a pure function of ``parts`` (SHA-256 of their text)."""
    return hashlib.sha256(":".join(str(p) for p in ("perfab-perturb", *parts)).encode()).digest()


def _below(blob: bytes, bound: int) -> int:
    """A number in 0..bound-1 from ``blob``'s first eight bytes."""
    return int.from_bytes(blob[:8], "little") % bound


def boot_word(seed: int, boot: int) -> str:
    """Boot ``boot``'s kernel parameter: ``perfab_boot=`` and 1..``BOOT_WORD_MAX`` seeded characters."""
    blob = _stream(seed, "boot", boot)
    length = 1 + _below(blob, BOOT_WORD_MAX)
    chars = "".join(_ALPHABET[b % len(_ALPHABET)] for b in (blob * 3)[8:8 + length])
    return f"{BOOT_WORD}={chars}"


def longest_boot_word() -> str:
    """A boot word of the most characters a boot may get: what a command line must have room for."""
    return f"{BOOT_WORD}={'x' * BOOT_WORD_MAX}"


@dataclass(frozen=True)
class RunDraw:
    """One run's perturbation, the same for run ``rep`` of a cell on every side."""

    entropy: bytes  # ENTROPY_BYTES credited to the guest's random pool before the workload
    spin: int  # iterations the guest's launcher spins before the start marker
    pad: int  # bytes added to the workload's environment pad


@dataclass(frozen=True)
class Draw:
    """What one run is given: the boot it goes on from, that boot's command-line word, its own perturbation."""

    boot: int  # the boot (with unit "run": the run's own boot) the run goes on from
    word: str  # that boot's kernel parameter, ``perfab_boot=...``
    run: RunDraw  # the run's own perturbation


def run_draw(seed: int, workload: str, params: tuple, rep: int) -> RunDraw:
    """The perturbation of the ``rep``-th run of every side's cell (``workload``, ``params``)."""
    blob = _stream(seed, "run", workload, repr(tuple(params)), rep)
    more = _stream(seed, "entropy", workload, repr(tuple(params)), rep)
    return RunDraw(entropy=(more + _stream(seed, "entropy2", workload, repr(tuple(params)), rep))[:ENTROPY_BYTES],
                   spin=_below(blob, SPIN_MAX + 1), pad=_below(blob[8:], PAD_MAX + 1))


def run_cost(notes: tuple[str, ...]) -> tuple[str, float] | None:
    """("saved" or "restored", host seconds) of a guest run, from its notes; None for any other run."""
    for note in notes:
        kind = "saved" if SAVED_NOTE in note else "restored" if RESTORED_NOTE in note else None
        at = note.find(POWERED_OFF)
        if kind is not None and at >= 0:
            try:
                return kind, float(note[at + len(POWERED_OFF):].split()[0])
            except (IndexError, ValueError):
                return None
    return None
