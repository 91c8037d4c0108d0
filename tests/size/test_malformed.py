"""Malformed ELF files: one field of a real gcc object overwritten, one line back.

Each case sets one header, section or symbol field of ``util.o`` (gcc -O2
-c) to a value no valid file holds (2**63, 2**64 - 1, ...) and expects the
reader to name the file and the field, and ``perfab size`` to exit 2 with
that one line.  Before the checks in ``elf.py`` these were OverflowError
tracebacks (numpy offsets and int64 sizes past 2**63) or vague messages.
"""

from __future__ import annotations

import io
import re
import struct
from pathlib import Path

import pytest
from size_helpers import SRC, compile_c

from perfab.cli import main
from perfab.errors import UsageError
from perfab.size.elf import read_elf

E_SHOFF, E_SHNUM, E_SHSTRNDX = 0x28, 0x3C, 0x3E
SH = {"name": (0, "I"), "offset": (24, "Q"), "size": (32, "Q"), "link": (40, "I")}
ST = {"name": (0, "I"), "value": (8, "Q"), "size": (16, "Q")}
INVALID = ": not a valid ELF file (truncated or corrupt); rebuild or re-copy it"


@pytest.fixture(scope="module")
def obj(tmp_path_factory) -> Path:
    return compile_c(tmp_path_factory.mktemp("malformed") / "util.o", "-O2", "-c", str(SRC / "util.c"))


class Patch:
    """Byte-level edits of an ELF64 little-endian file, located by its own headers."""

    def __init__(self, path: Path):
        self.data = bytearray(path.read_bytes())
        self.elf = read_elf(path)
        self.shoff = struct.unpack_from("<Q", self.data, E_SHOFF)[0]

    def index(self, name: str) -> int:
        return next(s.index for s in self.elf.sections if s.name == name)

    def sh(self, name: str, field: str, value: int) -> None:
        off, fmt = SH[field]
        struct.pack_into("<" + fmt, self.data, self.shoff + 64 * self.index(name) + off, value)

    def sym(self, symbol: str, field: str, value: int) -> int:
        """Overwrite a field of ``symbol``; return its .symtab index."""
        i = self.elf.symbols.names.index(symbol) + 1
        symtab = struct.unpack_from("<Q", self.data, self.shoff + 64 * self.index(".symtab") + 24)[0]
        off, fmt = ST[field]
        struct.pack_into("<" + fmt, self.data, symtab + 24 * i + off, value)
        return i

    def ehdr(self, offset: int, fmt: str, value: int) -> None:
        struct.pack_into("<" + fmt, self.data, offset, value)


def _shoff(p, v):
    p.ehdr(E_SHOFF, "Q", v)
    return rf"section header table at offset {v} lies beyond the end of the file \({len(p.data)} bytes\)"


def _shnum(p, v):
    p.ehdr(E_SHNUM, "H", v)
    return (rf"section header table \({v} entries\) at offset {p.shoff}, {v * 64} bytes long, "
            rf"runs past the end of the file \({len(p.data)} bytes\)")


def _extended_count(p, v):
    p.ehdr(E_SHNUM, "H", 0)  # extended numbering: the count is section 0's sh_size
    struct.pack_into("<Q", p.data, p.shoff + 32, v)
    return (rf"section header table \({v} entries\) at offset {p.shoff}, {v * 64} bytes long, "
            rf"runs past the end of the file \({len(p.data)} bytes\)")


def _section(name, field):
    def patch(p, v):
        p.sh(name, field, v)
        where = rf"at offset {v} lies beyond" if field == "offset" else rf"at offset \d+, {v} bytes long, runs past"
        return rf"section {p.index(name)} \({re.escape(name)}\) {where} the end of the file \({len(p.data)} bytes\)"
    return patch


def _bss_size(p, v):
    p.sh(".bss", "size", v)
    return rf"section {p.index('.bss')} \(\.bss\) is {v} bytes, larger than any address space"


def _section_name(p, v):
    p.sh(".text", "name", v)
    return rf"section {p.index('.text')}'s name at offset {v} lies outside the section name table \(\d+ bytes\)"


def _shstrndx(p, v):
    p.ehdr(E_SHSTRNDX, "H", v)
    return rf"section name table index \(e_shstrndx\) {v} is past the last of the {len(p.elf.sections)} sections"


def _symtab_link(p, v):
    p.sh(".symtab", "link", v)
    return rf"symbol table's string table index \(sh_link\) {v} is past the last of the {len(p.elf.sections)} sections"


def _symbol_size(p, v):
    i = p.sym("helper_util", "size", v)
    return rf"symbol {i} \(helper_util\) is {v} bytes, larger than any address space"


def _symbol_name(p, v):
    i = p.sym("helper_util", "name", v)
    return rf"symbol {i}'s name at offset {v} lies outside its string table \(\d+ bytes\)"


CASES = [
    ("e_shoff", _shoff, [2**63, 2**64 - 1, 2**32 - 1]),
    ("e_shnum", _shnum, [0xFFFF]),
    ("extended e_shnum", _extended_count, [2**63, 2**64 - 1]),
    (".symtab sh_offset", _section(".symtab", "offset"), [2**63, 2**64 - 1]),
    (".symtab sh_size", _section(".symtab", "size"), [2**63, 2**64 - 1, 2**32 - 1]),
    (".strtab sh_offset", _section(".strtab", "offset"), [2**63, 2**64 - 1]),
    (".text sh_size", _section(".text", "size"), [2**63, 2**64 - 1]),
    (".bss sh_size", _bss_size, [2**63, 2**64 - 1]),
    ("sh_name", _section_name, [2**32 - 1]),
    ("e_shstrndx", _shstrndx, [0xFF00]),
    (".symtab sh_link", _symtab_link, [2**32 - 1]),
    ("st_size", _symbol_size, [2**63, 2**64 - 1]),
    ("st_name", _symbol_name, [2**32 - 1]),
]


@pytest.mark.parametrize("patch,value", [(p, v) for _, p, vs in CASES for v in vs],
                         ids=[f"{n}={v:#x}" for n, _, vs in CASES for v in vs])
def test_field_past_the_file_or_2_63_is_one_line_not_overflow_error(tmp_path, obj, patch, value):
    p = Patch(obj)
    expected = patch(p, value)
    bad = tmp_path / "OLD.o"
    bad.write_bytes(bytes(p.data))
    with pytest.raises(UsageError) as caught:
        read_elf(bad)
    assert re.fullmatch(re.escape(f"{bad}: ") + expected + re.escape(INVALID), str(caught.value))
    for flags in ([], ["--compat"]):  # --compat reads with the compiled reader first, which must not accept it
        out, err = io.StringIO(), io.StringIO()
        assert main(["size", *flags, str(bad), str(obj)], out, err) == 2
        assert err.getvalue() == f"perfab size: {caught.value}\n" and out.getvalue() == ""


def test_file_shorter_than_its_elf_header_names_the_header(tmp_path):
    bad = tmp_path / "short.o"
    bad.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 33)
    with pytest.raises(UsageError,
                       match=r"ELF header at offset 0, 64 bytes long, runs past the end of the file \(40 bytes\)"):
        read_elf(bad)


def test_symbol_at_the_top_of_the_address_space_is_read_not_overflow_error(tmp_path, obj):
    """st_value 2**64 - 1 is a strange address, not a corrupt file: the diff runs and the symbol covers nothing."""
    p = Patch(obj)
    p.sym("helper_util", "value", 2**64 - 1)
    odd = tmp_path / "odd.o"
    odd.write_bytes(bytes(p.data))
    out, err = io.StringIO(), io.StringIO()
    assert main(["size", "--no-dwarf", str(obj), str(odd)], out, err) == 0, err.getvalue()
    text = next(line for line in out.getvalue().splitlines() if line.startswith(".text "))
    size = read_elf(obj).symbols.size[read_elf(obj).symbols.names.index("helper_util")]
    assert text.split()[-1] == "ok" and int(text.split()[6]) == size  # its bytes are now uncovered


def test_truncated_executable_names_the_section_header_table(tmp_path, build):
    data = build("gcc", "-O2", "OLD").read_bytes()
    cut = tmp_path / "cut"
    cut.write_bytes(data[:4096])
    shoff = struct.unpack_from("<Q", data, E_SHOFF)[0]
    with pytest.raises(UsageError,
                       match=rf"section header table at offset {shoff} lies beyond the end of the file \(4096 bytes\)"):
        read_elf(cut)
