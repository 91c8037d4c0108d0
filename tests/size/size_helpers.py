"""Builds the test programs once per session, with the compilers on this machine.

``src/prog.c`` + ``src/util.c`` are compiled twice (``-DOLD`` and not) per
compiler and optimisation level; each function in them changes between the
two builds in one known way (see the comments in ``prog.c``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).parent / "src"
GOLDEN = Path(__file__).parent / "golden"


def size_main(argv: list[str], stdout, stderr) -> int:
    """``perfab size ARGV`` in-process, through the one parser of ``perfab`` (``perfab.cli.main``)."""
    from perfab.cli import main

    return main(["size", *argv], stdout, stderr)


def compile_c(out: Path, *args: str, cc: str = "gcc", cwd: Path | None = None) -> Path:
    """Run the compiler (in ``cwd``); fail the test with its stderr if it fails."""
    proc = subprocess.run([cc, *args, "-o", str(out)], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        pytest.fail(f"{cc} {' '.join(args)} failed: {proc.stderr}")
    return out


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """build(cc, opt, variant, debug=True) -> path of the linked prog.c + util.c."""
    root = tmp_path_factory.mktemp("size-build")
    cache: dict[tuple, Path] = {}

    def _build(cc: str = "gcc", opt: str = "-O2", variant: str = "OLD", debug: bool = True) -> Path:
        key = (cc, opt, variant, debug)
        if key not in cache:
            if shutil.which(cc) is None:
                pytest.skip(f"{cc} is not installed")
            out = root / f"prog-{cc}{opt}-{variant}{'-g' if debug else ''}"
            flags = [opt, f"-D{variant}"] + (["-g"] if debug else [])
            # relative sources compiled in SRC: DWARF paths do not depend on where pytest runs
            cache[key] = compile_c(out, *flags, "prog.c", "util.c", cc=cc, cwd=SRC)
        return cache[key]

    return _build


@pytest.fixture(scope="session")
def pair(build):
    """pair(cc, opt, debug=True) -> (old, new) paths."""

    def _pair(cc: str = "gcc", opt: str = "-O2", debug: bool = True) -> tuple[Path, Path]:
        return build(cc, opt, "OLD", debug), build(cc, opt, "NEW", debug)

    return _pair


def compilers() -> list[str]:
    """gcc, and clang when installed."""
    return ["gcc"] + (["clang"] if shutil.which("clang") else [])
