"""Read the parts of an ELF file a size diff needs: header, sections, ``.symtab``.

Only what is read is mapped: the file is opened with ``mmap`` and the section
header table and the symbol table are viewed as numpy structured arrays, so a
500 MB debug ``vmlinux`` costs the few megabytes of its symbol table.
ELF32 and ELF64, little and big endian, ET_EXEC, ET_DYN and ET_REL.

Layouts follow the System V ABI, "Object Files" chapter (``Elf64_Ehdr``,
``Elf64_Shdr``, ``Elf64_Sym`` and their 32-bit forms), including the
extended numbering escapes (``e_shnum == 0``, ``SHN_XINDEX``).

Every offset, size, count and index read from the file is checked before
it is used (``_span``, ``_index``): a truncated or corrupt file is a
``UsageError`` naming the file and the field that is wrong, e.g. "section
header table at offset 18446744073709551615 lies beyond the end of the file
(4096 bytes)".  What the checks guarantee the rest of the package:

- every section with contents (not ``SHT_NOBITS``/``SHT_NULL``), the
  section header table and the symbol table lie inside the file;
- every ``sh_size`` and ``st_size`` is below 2**63 (``MAX_SIZE_BYTES``), so
  sizes fit ``int64``;
- every symbol name offset lies inside its string table, which ends in NUL.
"""

from __future__ import annotations

import mmap
import stat
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from perfab.errors import UsageError

SHT_NULL = 0
SHT_NOBITS = 8
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_SYMTAB_SHNDX = 18
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_COMPRESSED = 0x800
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF
STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_TLS, STT_GNU_IFUNC = 1, 2, 3, 4, 6, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
ET_NAMES = {1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
MAX_SIZE_BYTES = 2**63  # no file or address space reaches it: a larger sh_size/st_size is corruption

_SHDR_FIELDS = ["name", "type", "flags", "addr", "offset", "size", "link", "info", "addralign", "entsize"]
_SYM64 = [("name", "u4"), ("info", "u1"), ("other", "u1"), ("shndx", "u2"), ("value", "u8"), ("size", "u8")]
_SYM32 = [("name", "u4"), ("value", "u4"), ("size", "u4"), ("info", "u1"), ("other", "u1"), ("shndx", "u2")]


@dataclass(frozen=True)
class Section:
    """One section header, with its name resolved."""

    index: int  # position in the section header table
    name: str  # from .shstrtab
    type: int  # sh_type (SHT_*)
    flags: int  # sh_flags (SHF_*)
    addr: int  # sh_addr: load address (0 in ET_REL)
    size_bytes: int  # sh_size: bytes in memory (SHT_NOBITS occupy none in the file)

    @property
    def alloc(self) -> bool:
        """Whether the section is loaded into memory at run time."""
        return bool(self.flags & SHF_ALLOC)


@dataclass(frozen=True)
class ElfSymbols:
    """The ``.symtab`` as parallel arrays (one entry per symbol, index 0 dropped).

    Names are decoded lazily: ``name(i)`` one at a time, ``names`` all the
    sized, defined ones at once (then cached).
    """

    value: np.ndarray  # st_value (uint64)
    size: np.ndarray  # st_size in bytes (uint64)
    type: np.ndarray  # ELF symbol type, st_info & 0xf (uint8)
    bind: np.ndarray  # ELF binding, st_info >> 4 (uint8)
    shndx: np.ndarray  # section index, extended indices resolved (uint32)
    file_owner: np.ndarray  # position of the STT_FILE symbol a local follows (-1: none, or a global)
    name_offset: np.ndarray  # st_name: offset of each name in ``strtab`` (int64)
    strtab: bytes  # the string table the names point into

    def name(self, i: int) -> str:
        """The name of symbol ``i``."""
        off = int(self.name_offset[i])
        return self.strtab[off : self.strtab.find(b"\0", off)].decode("utf-8", "surrogateescape") if off else ""

    def file_of(self, i: int) -> str | None:
        """The source file a local symbol follows in the table; None for globals."""
        owner = int(self.file_owner[i])
        return self.name(owner) if owner >= 0 else None

    @cached_property
    def names(self) -> list[str]:
        """Every name ('' for unnamed, undefined and zero-size symbols, which are not decoded)."""
        wanted = ((self.size != 0) & (self.shndx != SHN_UNDEF)) | (self.type == STT_FILE)
        return _names(self.strtab, self.name_offset, wanted)

    @cached_property
    def file(self) -> list[str | None]:
        """``file_of`` for every symbol."""
        names = {int(o): self.name(int(o)) for o in np.unique(self.file_owner[self.file_owner >= 0])}
        return [names.get(o) for o in self.file_owner.tolist()]


@dataclass(frozen=True)
class ElfFile:
    """What a size diff reads from one ELF file."""

    path: str  # as given by the caller
    elf_class: int  # 32 or 64
    big_endian: bool  # byte order of the file
    elf_type: str  # "ET_EXEC", "ET_DYN", "ET_REL", ...
    machine: int  # e_machine
    sections: tuple[Section, ...]  # the section header table, index 0 included
    symbols: ElfSymbols | None  # None when the file has no .symtab (stripped)
    has_debug_info: bool  # a .debug_info section is present
    file_bytes: int = 0  # the file's size
    inflated_bytes: int = 0  # what its compressed sections declare they hold uncompressed (Chdr ch_size, .zdebug)


class _Corrupt(ValueError):
    """What is wrong with the file, in words, without its name (``read_elf`` adds it)."""


def read_elf(path: str | Path) -> ElfFile:
    """Read ``path``'s header, sections and symbol table; UsageError if it is not valid ELF."""
    p = Path(path)
    _regular(path, p)
    try:
        with open(p, "rb") as fh:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; give the path of an ELF binary or object") from None
    except (IsADirectoryError, PermissionError, ValueError, OSError) as err:
        why = getattr(err, "strerror", None) or err
        raise UsageError(f"{path}: cannot read it ({why}); give a readable, non-empty ELF file") from None
    invalid = "not a valid ELF file (truncated or corrupt); rebuild or re-copy it"
    try:
        return _parse(str(path), data)
    except _Corrupt as err:
        raise UsageError(f"{path}: {err}: {invalid}") from None
    except (struct.error, ValueError, IndexError, OverflowError) as err:  # a field no check above covers
        raise UsageError(f"{path}: unreadable ELF structure ({type(err).__name__}: {err}): {invalid}") from None


def _regular(path: str | Path, p: Path) -> None:
    """Refuse what is not a regular file before opening it: a FIFO would block, a device never end."""
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return  # open() says so
    except OSError as err:
        raise UsageError(f"{path}: cannot read it ({err.strerror or err}); give a readable, non-empty ELF "
                         "file") from None
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
                else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
        raise UsageError(f"{path}: {kind}, not a regular file; give the path of an ELF file (copy a stream to a "
                         "file first)")


def _parse(path: str, data) -> ElfFile:
    if data[:8] == b"!<arch>\n":
        raise UsageError(f"{path}: an ar archive (.a), not one ELF file; diff the linked binary, or its members "
                         "(ar x) one by one")
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise UsageError(f"{path}: not an ELF file (bad magic); give a binary, shared object or .o file")
    cls, enc = data[4], data[5]
    if cls not in (1, 2) or enc not in (1, 2):
        raise UsageError(f"{path}: unknown ELF class {cls} or data encoding {enc}; the file is corrupt")
    end = "<" if enc == 1 else ">"
    wide = cls == 2
    fmt = end + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH")
    _span(data, "ELF header", 0, 16 + struct.calcsize(fmt))
    ehdr = struct.unpack_from(fmt, data, 16)
    e_type, e_machine, e_shoff = ehdr[0], ehdr[1], ehdr[5]
    e_shentsize, e_shnum, e_shstrndx = ehdr[10], ehdr[11], ehdr[12]
    shdrs = _section_headers(data, end, wide, e_shoff, e_shentsize, e_shnum)
    if e_shstrndx == SHN_XINDEX and len(shdrs):
        e_shstrndx = int(shdrs["link"][0])
    sections = _sections(data, shdrs, e_shstrndx)
    return ElfFile(
        path=path,
        elf_class=64 if wide else 32,
        big_endian=enc == 2,
        elf_type=ET_NAMES.get(e_type, f"ET_{e_type:#x}"),
        machine=e_machine,
        sections=sections,
        symbols=_symbols(data, end, wide, shdrs, sections),
        has_debug_info=any(s.name in (".debug_info", ".zdebug_info") for s in sections),
        file_bytes=len(data),
        inflated_bytes=_inflated(data, end, wide, shdrs, sections),
    )


def _inflated(data, end: str, wide: bool, shdrs: np.ndarray, sections: tuple[Section, ...]) -> int:
    """Bytes the compressed sections declare they inflate to: ``ch_size`` of an SHF_COMPRESSED section's
    Elf_Chdr, or the big-endian size after a ``.zdebug_*`` section's ``ZLIB`` magic."""
    total = 0
    chdr = end + ("IIQQ" if wide else "III")
    for sec, row in zip(sections, shdrs.tolist()):
        offset, size = row[4], row[5]
        if sec.type in (SHT_NOBITS, SHT_NULL):
            continue
        if sec.flags & SHF_COMPRESSED and size >= struct.calcsize(chdr):
            total += struct.unpack_from(chdr, data, offset)[2 if wide else 1]
        elif sec.name.startswith(".zdebug") and size >= 12 and data[offset:offset + 4] == b"ZLIB":
            total += struct.unpack_from(">Q", data, offset + 4)[0]
    return total


def _span(data, what: str, offset: int, size: int) -> None:
    """Check that ``size`` bytes at ``offset`` lie inside the file."""
    n = len(data)
    if offset > n or (size and offset >= n):
        raise _Corrupt(f"{what} at offset {offset} lies beyond the end of the file ({n} bytes)")
    if size > n - offset:
        raise _Corrupt(f"{what} at offset {offset}, {size} bytes long, runs past the end of the file ({n} bytes)")


def _index(what: str, index: int, count: int) -> None:
    """Check that a section index read from the file names one of the ``count`` sections."""
    if index >= count:
        raise _Corrupt(f"{what} {index} is past the last of the {count} sections")


def _section_headers(data, end: str, wide: bool, shoff: int, entsize: int, shnum: int) -> np.ndarray:
    width = "u8" if wide else "u4"
    kinds = ["u4", "u4", width, width, width, width, "u4", "u4", width, width]
    dtype = np.dtype([(n, end + k) for n, k in zip(_SHDR_FIELDS, kinds)])
    if shoff == 0:
        return np.zeros(0, dtype=dtype)
    if entsize != dtype.itemsize:
        raise _Corrupt(f"section header entry size is {entsize} bytes, "
                       f"not the {dtype.itemsize} of ELF{64 if wide else 32}")
    _span(data, "section header table", shoff, dtype.itemsize)
    if shnum == 0:  # extended numbering: the count lives in section 0's sh_size
        shnum = int(np.frombuffer(data, dtype=dtype, count=1, offset=shoff)["size"][0])
    _span(data, f"section header table ({shnum} entries)", shoff, shnum * entsize)
    return np.frombuffer(data, dtype=dtype, count=shnum, offset=shoff)


def _contents(data, shdrs: np.ndarray, index: int, what: str) -> bytes:
    """The bytes of section ``index`` (checked to lie in the file by ``_sections``)."""
    row = shdrs[index]
    if int(row["type"]) in (SHT_NOBITS, SHT_NULL):
        kind = "SHT_NOBITS" if int(row["type"]) == SHT_NOBITS else "SHT_NULL"
        raise _Corrupt(f"{what} (section {index}) has no contents in the file ({kind})")
    offset = int(row["offset"])
    return bytes(data[offset : offset + int(row["size"])])


def _sections(data, shdrs: np.ndarray, shstrndx: int) -> tuple[Section, ...]:
    """Sections with their names; checks each against the file and ``MAX_SIZE_BYTES``."""
    n = len(shdrs)
    table = b""
    if n and shstrndx != SHN_UNDEF:
        _index("section name table index (e_shstrndx)", shstrndx, n)
        _section_in_file(data, shstrndx, "section name table", shdrs[shstrndx].tolist())
        table = _contents(data, shdrs, shstrndx, "section name table")
        if table and table[-1:] != b"\0":
            raise _Corrupt(f"the section name table (section {shstrndx}) does not end in a NUL byte, as every ELF "
                           "string table must")
    out = []
    for i, row in enumerate(shdrs.tolist()):
        name = _table_str(table, row[0], f"section {i}'s name", "the section name table") if table else ""
        _section_in_file(data, i, name, row)
        out.append(Section(i, name, row[1], row[2], row[3], row[5]))
    return tuple(out)


def _section_in_file(data, i: int, name: str, row: list) -> None:
    """Sections with contents lie in the file; the others' sizes stay below ``MAX_SIZE_BYTES``."""
    typ, offset, size = row[1], row[4], row[5]
    if typ in (SHT_NOBITS, SHT_NULL):
        if size >= MAX_SIZE_BYTES:
            raise _Corrupt(f"section {i} ({name}) is {size} bytes, larger than any address space")
    else:
        _span(data, f"section {i} ({name})", offset, size)


def _table_str(table: bytes, offset: int, what: str, where: str) -> str:
    """The NUL-terminated string at ``offset`` of a string table (to its end if unterminated)."""
    if offset >= len(table):
        raise _Corrupt(f"{what} at offset {offset} lies outside {where} ({len(table)} bytes)")
    stop = table.find(b"\0", offset)
    return table[offset : stop if stop >= 0 else len(table)].decode("utf-8", "surrogateescape")


def _symbols(data, end: str, wide: bool, shdrs: np.ndarray, sections: tuple[Section, ...]) -> ElfSymbols | None:
    found = np.nonzero(shdrs["type"] == SHT_SYMTAB)[0]
    if len(found) == 0:
        return None
    index = int(found[0])
    sh = shdrs[index]
    dtype = np.dtype([(n, end + k) for n, k in (_SYM64 if wide else _SYM32)])
    if int(sh["entsize"]) not in (0, dtype.itemsize):
        raise _Corrupt(f"symbol table entry size is {int(sh['entsize'])} bytes, "
                       f"not the {dtype.itemsize} of ELF{64 if wide else 32}")
    count = int(sh["size"]) // dtype.itemsize
    syms = np.frombuffer(data, dtype=dtype, count=count, offset=int(sh["offset"]))[1:]
    link = int(sh["link"])
    _index("symbol table's string table index (sh_link)", link, len(shdrs))
    if int(shdrs["type"][link]) != SHT_STRTAB:
        what = "itself" if link == index else f"section {link}, of type {int(shdrs['type'][link])}"
        raise _Corrupt(f"the symbol table (section {index}) links to {what} for its names, not to a SHT_STRTAB "
                       "string table")
    strings = _contents(data, shdrs, link, f"string table of {sections[index].name}")
    _check_symbols(syms, strings)
    shndx = _extended_shndx(data, end, shdrs, index, syms)
    return ElfSymbols(**_with_files(syms, syms["info"], shndx, strings if strings.endswith(b"\0") else strings + b"\0"))


def _check_symbols(syms: np.ndarray, strings: bytes) -> None:
    """Every name offset inside the string table, every size below ``MAX_SIZE_BYTES``."""
    names = syms["name"].astype(np.int64)
    bad = np.flatnonzero((names >= len(strings)) & (names != 0))
    if len(bad):
        j = int(bad[0])
        raise _Corrupt(f"symbol {j + 1}'s name at offset {names[j]} "
                       f"lies outside its string table ({len(strings)} bytes)")
    big = np.flatnonzero(syms["size"] >= MAX_SIZE_BYTES) if syms.dtype["size"].itemsize == 8 else []
    if len(big):
        j = int(big[0])
        name = _table_str(strings, int(names[j]), "", "") if names[j] else ""
        raise _Corrupt(f"symbol {j + 1} ({name}) is {int(syms['size'][j])} bytes, larger than any address space")


def _names(strings: bytes, offsets: np.ndarray, wanted: np.ndarray) -> list[str]:
    """Names of the ``wanted`` symbols ('' for the others), sliced from one decoded string table."""
    names = [""] * len(offsets)
    idx = np.flatnonzero(wanted & (offsets != 0))
    if len(idx) == 0:
        return names
    nul = np.flatnonzero(np.frombuffer(strings, dtype=np.uint8) == 0)
    starts = offsets[idx].astype(np.int64)
    ends = nul[np.minimum(np.searchsorted(nul, starts), len(nul) - 1)]
    if strings.isascii():
        text = strings.decode("ascii")
        found = [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
    else:
        found = [strings[a:b].decode("utf-8", "surrogateescape") for a, b in zip(starts.tolist(), ends.tolist())]
    for i, name in zip(idx.tolist(), found):
        names[i] = name
    return names


def _extended_shndx(data, end: str, shdrs: np.ndarray, symtab_index: int, syms: np.ndarray) -> np.ndarray:
    shndx = syms["shndx"].astype(np.uint32)
    escaped = shndx == SHN_XINDEX
    if escaped.any():
        match = np.nonzero((shdrs["type"] == SHT_SYMTAB_SHNDX) & (shdrs["link"] == symtab_index))[0]
        if len(match):
            k = int(match[0])
            if int(shdrs["size"][k]) < 4 * (len(syms) + 1):
                raise _Corrupt(f"section {k} (SHT_SYMTAB_SHNDX) holds {int(shdrs['size'][k]) // 4} section indices "
                               f"for {len(syms) + 1} symbols")
            ext = np.frombuffer(data, dtype=end + "u4", count=len(syms) + 1, offset=int(shdrs["offset"][k]))
            shndx[escaped] = ext[1:][escaped]
        else:
            j = int(np.flatnonzero(escaped)[0])
            raise _Corrupt(f"symbol {j + 1} has st_shndx SHN_XINDEX but no SHT_SYMTAB_SHNDX section holds its "
                           "section index")
    return shndx


def _with_files(syms: np.ndarray, info: np.ndarray, shndx: np.ndarray, strings: bytes) -> dict:
    """Fields of ElfSymbols, with each local symbol tied to the STT_FILE before it."""
    types = (info & 0xF).astype(np.uint8)
    binds = (info >> 4).astype(np.uint8)
    offsets = syms["name"].astype(np.int64)
    file_idx = np.flatnonzero(types == STT_FILE)
    owner = np.searchsorted(file_idx, np.arange(len(syms)), side="right") - 1
    first_bytes = np.frombuffer(strings, dtype=np.uint8)[np.minimum(offsets[file_idx], max(len(strings) - 1, 0))]
    named = np.append(first_bytes != 0, False)
    named[:-1] &= offsets[file_idx] != 0
    owner = np.where((binds == STB_LOCAL) & named[owner], owner, -1)  # an empty FILE name ends a file's locals
    owner = np.where(owner >= 0, file_idx[np.maximum(owner, 0)] if len(file_idx) else -1, -1)
    return dict(
        value=syms["value"].astype(np.uint64),
        size=syms["size"].astype(np.uint64),
        type=types,
        bind=binds,
        shndx=shndx,
        file_owner=owner,
        name_offset=offsets,
        strtab=strings,
    )
