"""Build the small C programs of these tests with the real compilers."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

C_DIR = Path(__file__).parent / "c"


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """``build("sites.c", "-O2", "-g", cc="gcc", link=True) -> Path``, cached per arguments.

    Sources compile from ``C_DIR`` by relative name, so DW_AT_call_file is
    the bare file name.
    """
    out = tmp_path_factory.mktemp("inline")
    cache: dict[tuple, Path] = {}

    def _build(source: str, *flags: str, cc: str = "gcc", link: bool = True) -> Path:
        key = (source, flags, cc, link)
        if key not in cache:
            if not have(cc):
                pytest.skip(f"{cc} not installed (the Makefile installs it)")
            target = out / f"{len(cache)}-{Path(source).stem}{'' if link else '.o'}"
            argv = [cc, *flags, source, "-o", str(target)] + ([] if link else ["-c"])
            subprocess.run(argv, cwd=C_DIR, check=True, capture_output=True, text=True)
            cache[key] = target
        return cache[key]

    return _build


def readelf_info(path: Path) -> str:
    """``readelf --debug-dump=info`` of ``path`` (an independent DWARF reader)."""
    return subprocess.run(
        ["readelf", "--debug-dump=info", str(path)], check=True, capture_output=True, text=True
    ).stdout


def readelf_inline_count(path: Path) -> int:
    return readelf_info(path).count("(DW_TAG_inlined_subroutine)")


def dwarfdump_inline_bytes(path: Path) -> Counter:
    """(callee, bytes) of every inlined subroutine per ``llvm-dwarfdump``, as a multiset.

    llvm-dwarfdump resolves DW_AT_ranges (.debug_ranges and .debug_rnglists)
    and high_pc itself, so its byte counts are an independent check.
    """
    if not have("llvm-dwarfdump"):
        pytest.skip("llvm-dwarfdump not installed (comes with clang/llvm)")
    text = subprocess.run(
        ["llvm-dwarfdump", "--debug-info", str(path)], check=True, capture_output=True, text=True
    ).stdout
    out: Counter = Counter()
    for die in re.split(r"\n(?=0x[0-9a-f]+: )", text):
        if "DW_TAG_inlined_subroutine" not in die.split("\n", 1)[0]:
            continue
        name = re.search(r'DW_AT_abstract_origin\s*\(0x[0-9a-f]+ "([^"]*)"\)', die).group(1)
        spans = re.findall(r"\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)", die)
        low = re.search(r"DW_AT_low_pc\s*\((0x[0-9a-f]+)\)", die)
        high = re.search(r"DW_AT_high_pc\s*\((0x[0-9a-f]+)\)", die)
        if low and high:
            spans.append((low.group(1), high.group(1)))
        out[(name, sum(int(b, 16) - int(a, 16) for a, b in spans))] += 1
    return out


def source_lines(source: str, needle: str) -> list[int]:
    """1-based lines of ``C_DIR/source`` that call ``needle``."""
    text = (C_DIR / source).read_text().splitlines()
    return [i for i, line in enumerate(text, 1) if needle in line and "static" not in line]


def site_keys(index) -> Counter:
    """Every site of ``index`` as a comparable key, as a multiset."""
    return Counter(
        (s.callee, s.caller, s.parent, s.call_file, s.call_line, s.exclusive_bytes, s.inclusive_bytes)
        for s in index.sites
    )


def section_extent(exe, name: str) -> tuple[int, int]:
    """(file offset, size) of section ``name`` of ``exe``, per readelf."""
    out = subprocess.run(["readelf", "-SW", str(exe)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split("]", 1)[-1].split()
        if fields and fields[0] == name:
            return int(fields[3], 16), int(fields[4], 16)
    raise AssertionError(f"{name} missing from {exe}")
