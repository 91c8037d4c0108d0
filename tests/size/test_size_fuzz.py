"""Fuzzing ``perfab size``: corrupt input gives a one-line error, never a traceback.

Inputs are random bytes, and real gcc output (an object and an executable,
each with and without ``-g``, and an ``-m32 -g`` object) and big-endian
ELF32/ELF64 objects (``elfwriter``) with header, section and symbol fields set to
edge values (0, 2**32 - 1, 2**63, 2**64 - 1, ...), bytes changed in the
symbol and DWARF sections, and truncations.  Properties:

- ``read_elf`` returns or raises ``UsageError`` with one line naming the
  fault (never the catch-all "unreadable ELF structure"); ``read_symbols``
  and the nm letters of what it returns never raise;
- the DWARF reader returns, or raises ``UsageError``/``ToolError``;
- ``perfab size OLD NEW`` (through ``perfab.cli.main``) exits 0, 1 or 2 and
  writes at most one line to stderr, ``perfab size: ...``.

numpy's RuntimeWarnings (overflow, invalid casts) are errors here: they
would reach the user's terminal.  Hypothesis runs derandomized with bounded
examples (about 10 s in all on this machine).
"""

from __future__ import annotations

import io
import re
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from elfwriter import write_elf
from size_helpers import SRC, compile_c

from perfab.cli import main
from perfab.errors import ToolError, UsageError
from perfab.size.compat import nm_letters
from perfab.size.elf import read_elf
from perfab.size.inline import read_inline_index
from perfab.size.symbols import read_symbols

SPECIAL = (0, 1, 0x7F, 0xFF, 0xFFFF, 2**31, 2**32 - 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1)
ONE_LINE = re.compile(r"perfab size: [^\n]+\n")
FUZZ = settings(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))


@dataclass(frozen=True)
class Base:
    """A real ELF file and where its fields and interesting bytes are."""

    path: Path  # the intact file
    data: bytes  # its bytes
    order: str  # "little" or "big"
    fields: tuple[tuple[int, int], ...]  # (offset, width) of every header, section header and symbol field
    regions: tuple[tuple[int, int], ...]  # [start, stop) of the whole file, .symtab, .strtab and each .debug_* section
    debug: tuple[tuple[int, int], ...]  # [start, stop) of each .debug_* section


# (offset, width) of the fields, ELF64 then ELF32 (System V ABI, "Object Files")
EHDR = {64: ((4, 1), (5, 1), (0x10, 2), (0x12, 2), (0x28, 8), (0x3A, 2), (0x3C, 2), (0x3E, 2)),
        32: ((4, 1), (5, 1), (0x10, 2), (0x12, 2), (0x20, 4), (0x2E, 2), (0x30, 2), (0x32, 2))}
SHDR = {64: ((0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 4), (44, 4), (48, 8), (56, 8)),
        32: tuple((4 * i, 4) for i in range(10))}
SYM = {64: ((0, 4), (4, 1), (6, 2), (8, 8), (16, 8)), 32: ((0, 4), (4, 4), (8, 4), (12, 1), (14, 2))}


def layout(path: Path) -> Base:
    """Fields and regions of an intact file, from its own headers."""
    data = path.read_bytes()
    bits, e = (64 if data[4] == 2 else 32), ("<" if data[5] == 1 else ">")
    shoff, (shnum, shstrndx) = EHDR[bits][4], (EHDR[bits][6], EHDR[bits][7])
    shoff = struct.unpack_from(e + ("Q" if bits == 64 else "I"), data, shoff[0])[0]
    shnum, shstrndx = struct.unpack_from(e + "HH", data, shnum[0])
    size, fmt = (64, "IIQQQQIIQQ") if bits == 64 else (40, "IIIIIIIIII")
    rows = [struct.unpack_from(e + fmt, data, shoff + size * i) for i in range(shnum)]
    names_at = rows[shstrndx][4]
    name = [data[names_at + r[0] : data.index(b"\0", names_at + r[0])].decode() for r in rows]
    fields = list(EHDR[bits]) + [(shoff + size * i + o, w) for i in range(shnum) for o, w in SHDR[bits]]
    regions, debug = [(0, len(data))], []
    for n, r in zip(name, rows):
        if r[1] == 2:  # SHT_SYMTAB
            step = 24 if bits == 64 else 16
            fields += [(r[4] + j + o, w) for j in range(step, r[5], step) for o, w in SYM[bits]]
        if n in (".symtab", ".strtab") or n.startswith(".debug_"):
            regions.append((r[4], r[4] + r[5]))
        if n.startswith(".debug_"):
            debug.append((r[4], r[4] + r[5]))
    return Base(path, data, "little" if e == "<" else "big", tuple(fields), tuple(regions), tuple(debug))


@pytest.fixture(scope="module")
def bases(build, tmp_path_factory) -> dict[str, Base]:
    root = tmp_path_factory.mktemp("fuzz-bases")
    (root / "m32.c").write_text("static int helper(int x) { return x * 3; }\nint table[8];\n"
                                "int use(int x) { return helper(x) + table[x & 7]; }\n")
    files = {
        "obj": compile_c(root / "util.o", "-O2", "-c", str(SRC / "util.c")),
        "obj-g": compile_c(root / "prog.o", "-O2", "-g", "-c", "prog.c", cwd=SRC),
        "exe": build("gcc", "-O2", "OLD", debug=False),
        "exe-g": build("gcc", "-O2", "OLD", debug=True),
        "obj32-g": compile_c(root / "m32.o", "-m32", "-O2", "-g", "-c", str(root / "m32.c")),
        "obj-be": write_elf(root / "be.o", 64, True),
        "obj32-be": write_elf(root / "be32.o", 32, True),
    }
    return {k: layout(p) for k, p in files.items()}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "OLD.o"


@st.composite
def corrupted(draw, base: Base, dwarf_only: bool = False) -> bytes:
    """``base`` with 1-3 edits: a field set to an edge value, a byte changed, or a truncation."""
    data = bytearray(base.data)
    for _ in range(draw(st.integers(1, 3))):
        op = "flip" if dwarf_only else draw(st.sampled_from(("field", "field", "flip", "truncate")))
        if op == "field":
            off, width = draw(st.sampled_from(base.fields))
            value = draw(st.sampled_from(SPECIAL) | st.integers(0, 2 ** (8 * width) - 1)) % 2 ** (8 * width)
            if off + width <= len(data):
                data[off : off + width] = value.to_bytes(width, base.order)
        elif op == "flip":
            lo, hi = draw(st.sampled_from(base.debug if dwarf_only else base.regions))
            pos = draw(st.integers(lo, hi - 1))
            if pos < len(data):
                data[pos] = draw(st.sampled_from((0, 0xFF, 0x80)) | st.integers(0, 255))
        else:
            data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


RANDOM = st.binary(max_size=400) | st.builds(
    lambda ident, rest: b"\x7fELF" + ident + rest, st.binary(min_size=3, max_size=3), st.binary(max_size=400)
)


def check_reader(path: Path) -> None:
    """read_elf returns or says in one line what is wrong; the symbol rules never raise."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            f = read_elf(path)
        except UsageError as err:
            assert "\n" not in str(err) and str(err).startswith(f"{path}: ")
            assert "unreadable ELF structure" not in str(err)  # every fault has its own check
            return
        read_symbols(f)
        nm_letters(f)


def check_cli(old: Path, new: Path, flags: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code = main(["size", *flags, str(old), str(new)], out, err)
    text = err.getvalue()
    assert code in (0, 1, 2)
    assert text == "" or ONE_LINE.fullmatch(text), text
    assert code == 0 or text, "a failure must say why"
    assert "unreadable ELF structure" not in text


@settings(FUZZ, max_examples=150)
@given(RANDOM)
def test_reader_survives_random_bytes(scratch, blob):
    scratch.write_bytes(blob)
    check_reader(scratch)


@settings(FUZZ, max_examples=300)
@given(st.data())
def test_reader_survives_corrupted_gcc_output(bases, scratch, data):
    base = bases[data.draw(st.sampled_from(sorted(bases)))]
    scratch.write_bytes(data.draw(corrupted(base)))
    check_reader(scratch)


FLAGS = st.sampled_from([[], ["--no-dwarf"], ["--compat"], ["--format", "markdown"], ["--format", "json", "-c"]])


@settings(FUZZ, max_examples=300)
@given(st.data())
def test_cli_survives_corrupted_gcc_output(bases, scratch, data):
    base = bases[data.draw(st.sampled_from(sorted(bases)))]
    scratch.write_bytes(data.draw(corrupted(base)))
    old, new = (scratch, base.path) if data.draw(st.booleans()) else (base.path, scratch)
    check_cli(old, new, data.draw(FLAGS))


@settings(FUZZ, max_examples=300)
@given(st.data())
def test_compiled_compat_reader_agrees_with_the_numpy_reader(bases, scratch, data):
    """Whatever the compiled reader answers, the numpy reader answers the same; what it declines, that one reads."""
    native = pytest.importorskip("perfab_native")
    if not hasattr(native, "nm_diff"):
        pytest.skip("the installed perfab_native predates nm_diff; rebuild it with `make native`")
    from perfab.size.bloat import format_compat
    from perfab.size.diff import diff_files
    from perfab.size.quick import compat_text

    base = bases[data.draw(st.sampled_from(sorted(bases)))]
    scratch.write_bytes(data.draw(corrupted(base)))
    old, new = (scratch, base.path) if data.draw(st.booleans()) else (base.path, scratch)
    mode = data.draw(st.sampled_from(["all", "categories"]))
    quick = compat_text(str(old), str(new), mode, allow_mismatch=True)
    if quick is not None:
        assert quick[0] == format_compat(list(diff_files(old, new, compat=True, mode=mode, allow_mismatch=True).tables))


@settings(FUZZ, max_examples=60)
@given(RANDOM, FLAGS)
def test_cli_survives_random_bytes(bases, scratch, blob, flags):
    scratch.write_bytes(blob)
    check_cli(scratch, bases["obj"].path, flags)


@settings(FUZZ, max_examples=150)
@given(st.data())
def test_dwarf_reader_survives_corrupted_debug_sections(bases, scratch, data):
    base = bases[data.draw(st.sampled_from(["obj-g", "exe-g", "obj32-g"]))]
    scratch.write_bytes(data.draw(corrupted(base, dwarf_only=True)))
    try:
        read_inline_index(scratch, threads=1)
    except (UsageError, ToolError) as err:
        assert "\n" not in str(err)
    out, err = io.StringIO(), io.StringIO()
    code = main(["size", str(scratch), str(base.path)], out, err)
    assert code in (0, 2) and (err.getvalue() == "" or ONE_LINE.fullmatch(err.getvalue()))

