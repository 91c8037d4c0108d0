"""Two builds of ``tests/size/src`` for the size page's tests, and ``perfab size`` in-process."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "size" / "src"  # prog.c + util.c: each function changes in a known way


def build_pair(out: Path) -> tuple[Path, Path]:
    """(old, new): prog.c + util.c built with gcc -O2 -g, with and without -DOLD."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (make sysdeps installs it)")
    paths = []
    for variant in ("OLD", "NEW"):
        binary = out / f"prog-{variant}"
        proc = subprocess.run(["gcc", "-O2", "-g", f"-D{variant}", "prog.c", "util.c", "-o", str(binary)],
                              cwd=SRC, capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.fail(f"gcc failed: {proc.stderr}")
        paths.append(binary)
    return paths[0], paths[1]


def size_cli(*argv) -> tuple[int, str, str]:
    """``perfab size`` in-process: (exit code, stdout, stderr)."""
    from perfab.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(["size", *map(str, argv)], out, err)
    return code, out.getvalue(), err.getvalue()
