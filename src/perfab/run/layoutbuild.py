"""Layout builds: each side built several times, each build's code and data moved by a seeded pad.

Where a function starts decides which cache sets its lines fall in and
which functions share a line, so a change anywhere in a program moves the
code behind it and can change its cache misses by accident (Mytkowicz et
al., ASPLOS 2009; Curtsinger & Berger, "Stabilizer", ASPLOS 2013).  A
deterministic simulator (cachegrind) repeats one placement exactly, run
after run: its counts say how this one layout behaves, not the change.

``experiment.layout_builds = K`` builds every side K times.  Build ``i``
links a pad object first, through ``{layout_cflags}`` (``-Wl,PAD.o``: the
linker takes it before the program's own objects): ``.text.unlikely``,
the first input section of the default linker script's ``.text``, holds
a seeded number of bytes (a multiple of 16 up to 4080: every L1i set and
place in a line), and ``.rodata`` and ``.data`` seeded pads of their own,
so every function, constant and global after them starts elsewhere.  Build
``i`` of every side gets the same pads, from the session's perturbation
seed (``perfab.replication``); the runs are spread over the builds (run k
of a cell on build k mod K) and verdicts take the build as the unit.
Compile-only steps ignore ``-Wl,``; a build whose link does not take the
flag builds the same program K times, which ``check_moved`` refuses.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from perfab.errors import ToolError, UsageError

PADS = Path(".perfab") / "layout"  # the pad objects, by content
TEXT_MAX = 4080  # bytes of code pad at most (a multiple of 16: functions keep their alignment)
DATA_MAX = 4032  # bytes of read-only data and of data pad at most (multiples of 64)


def pad_sizes(seed: int, build: int) -> tuple[int, int, int]:
    """(code, read-only data, data) pad bytes of build ``build``, the same for every side."""
    blob = hashlib.sha256(f"perfab-layout-build:{seed}:{build}".encode()).digest()
    pick = lambda at, step, most: step * (int.from_bytes(blob[at:at + 8], "little") % (most // step + 1))  # noqa
    return pick(0, 16, TEXT_MAX), pick(8, 64, DATA_MAX), pick(16, 64, DATA_MAX)


def _assembly(sizes: tuple[int, int, int]) -> str:
    text, rodata, data = sizes
    lines = [f'.section .text.unlikely.perfab_layout,"ax",@progbits\n.skip {text}, 0xcc',
             f'.section .rodata.perfab_layout,"a",@progbits\n.skip {rodata}',
             f'.section .data.perfab_layout,"aw",@progbits\n.skip {data}',
             '.section .note.GNU-stack,"",@progbits']
    return "\n".join(line for line in lines if ".skip 0" not in line) + "\n"


def pad_object(seed: int, build: int, where: Path = PADS) -> Path:
    """The pad object of build ``build`` (assembled once, named by its source's hash), as an absolute path."""
    source = _assembly(pad_sizes(seed, build))
    target = (where / f"pad-{hashlib.sha256(source.encode()).hexdigest()[:16]}.o").resolve()
    if target.exists():
        return target
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise ToolError("no C compiler to assemble the layout builds' pads: install gcc (make sysdeps)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        (Path(tmp) / "pad.s").write_text(source)
        done = subprocess.run([cc, "-c", "-o", str(Path(tmp) / "pad.o"), str(Path(tmp) / "pad.s")],
                              capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ToolError(f"cannot assemble a layout pad ({done.stderr.strip()[:200]}): check {cc}")
        os.replace(Path(tmp) / "pad.o", target)
    return target


def layout_flags(seed: int, builds: int) -> list[str]:
    """``{layout_cflags}`` of each of ``builds`` layout builds: the linker flag that links its pad first."""
    return [f"-Wl,{pad_object(seed, i)}" for i in range(builds)]


def check_moved(side: str, programs: list[Path]) -> None:
    """The layout builds of a side differ (their programs' bytes): a build that never passed ``{layout_cflags}``
    to its link made one program K times, and its builds would be one draw each side."""
    digests = set()
    for path in programs:
        try:
            digests.add(hashlib.sha256(path.read_bytes()).hexdigest())
        except OSError:
            return  # a program not built here (a script, a system binary): nothing to compare
    if len(programs) > 1 and len(digests) == 1:
        raise UsageError(f"side {side!r}: its {len(programs)} layout builds made the same program {programs[0]} "
                         "(the link never took {layout_cflags}); pass {layout_cflags} to the compiler that links "
                         "(e.g. CFLAGS and LDFLAGS), or remove layout_builds")
