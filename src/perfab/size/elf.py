"""Read the parts of an ELF file a size diff needs: header, sections, ``.symtab``.

Only what is read is mapped: the file is opened with ``mmap`` and the section
header table and the symbol table are viewed as numpy structured arrays, so a
500 MB debug ``vmlinux`` costs the few megabytes of its symbol table.
ELF32 and ELF64, little and big endian, ET_EXEC, ET_DYN and ET_REL.

Layouts follow the System V ABI, "Object Files" chapter (``Elf64_Ehdr``,
``Elf64_Shdr``, ``Elf64_Sym`` and their 32-bit forms), including the
extended numbering escapes (``e_shnum == 0``, ``SHN_XINDEX``).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from perfab.errors import UsageError

SHT_NOBITS = 8
SHT_SYMTAB = 2
SHT_SYMTAB_SHNDX = 18
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF
STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_TLS, STT_GNU_IFUNC = 1, 2, 3, 4, 6, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
ET_NAMES = {1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}

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


def read_elf(path: str | Path) -> ElfFile:
    """Read ``path``'s header, sections and symbol table; UsageError if it is not ELF."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; give the path of an ELF binary or object") from None
    except (IsADirectoryError, PermissionError, ValueError, OSError) as err:
        raise UsageError(f"{path}: cannot read it ({getattr(err, 'strerror', None) or err}); give a readable, non-empty ELF file") from None
    try:
        return _parse(str(path), data)
    except (struct.error, ValueError, IndexError) as err:
        raise UsageError(f"{path}: truncated or corrupt ELF ({err}); rebuild or re-copy the file") from None


def _parse(path: str, data) -> ElfFile:
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise UsageError(f"{path}: not an ELF file (bad magic); give a binary, shared object or .o file")
    cls, enc = data[4], data[5]
    if cls not in (1, 2) or enc not in (1, 2):
        raise UsageError(f"{path}: unknown ELF class {cls} or data encoding {enc}; the file is corrupt")
    end = "<" if enc == 1 else ">"
    wide = cls == 2
    ehdr = struct.unpack_from(end + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"), data, 16)
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
        symbols=_symbols(data, end, wide, shdrs),
        has_debug_info=any(s.name in (".debug_info", ".zdebug_info") for s in sections),
    )


def _section_headers(data, end: str, wide: bool, shoff: int, entsize: int, shnum: int) -> np.ndarray:
    width = "u8" if wide else "u4"
    kinds = ["u4", "u4", width, width, width, width, "u4", "u4", width, width]
    dtype = np.dtype([(n, end + k) for n, k in zip(_SHDR_FIELDS, kinds)])
    if shoff == 0:
        return np.zeros(0, dtype=dtype)
    if entsize != dtype.itemsize:
        raise ValueError(f"section header entry size {entsize}, expected {dtype.itemsize}")
    if shnum == 0:  # extended numbering: the count lives in section 0's sh_size
        shnum = int(np.frombuffer(data, dtype=dtype, count=1, offset=shoff)["size"][0])
    return np.frombuffer(data, dtype=dtype, count=shnum, offset=shoff)


def _cstr(data, offset: int) -> str:
    stop = data.find(b"\0", offset)
    return data[offset:stop].decode("utf-8", "surrogateescape")


def _sections(data, shdrs: np.ndarray, shstrndx: int) -> tuple[Section, ...]:
    out = []
    stroff = int(shdrs["offset"][shstrndx]) if 0 < shstrndx < len(shdrs) else None
    for i, row in enumerate(shdrs.tolist()):
        name = _cstr(data, stroff + row[0]) if stroff is not None else ""
        out.append(Section(i, name, row[1], row[2], row[3], row[5]))
    return tuple(out)


def _symbols(data, end: str, wide: bool, shdrs: np.ndarray) -> ElfSymbols | None:
    found = np.nonzero(shdrs["type"] == SHT_SYMTAB)[0]
    if len(found) == 0:
        return None
    sh = shdrs[found[0]]
    dtype = np.dtype([(n, end + k) for n, k in (_SYM64 if wide else _SYM32)])
    count = int(sh["size"]) // dtype.itemsize
    syms = np.frombuffer(data, dtype=dtype, count=count, offset=int(sh["offset"]))[1:]
    strtab = shdrs[int(sh["link"])]
    strings = data[int(strtab["offset"]) : int(strtab["offset"]) + int(strtab["size"])]
    shndx = _extended_shndx(data, end, shdrs, int(found[0]), syms)
    return ElfSymbols(**_with_files(syms, syms["info"], shndx, bytes(strings)))


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
            ext = np.frombuffer(data, dtype=end + "u4", count=len(syms) + 1, offset=int(shdrs["offset"][match[0]]))
            shndx[escaped] = ext[1:][escaped]
    return shndx


def _with_files(syms: np.ndarray, info: np.ndarray, shndx: np.ndarray, strings: bytes) -> dict:
    """Fields of ElfSymbols, with each local symbol tied to the STT_FILE before it."""
    types = (info & 0xF).astype(np.uint8)
    binds = (info >> 4).astype(np.uint8)
    offsets = syms["name"].astype(np.int64)
    file_idx = np.flatnonzero(types == STT_FILE)
    owner = np.searchsorted(file_idx, np.arange(len(syms)), side="right") - 1
    named = np.append(np.frombuffer(strings, dtype=np.uint8)[np.minimum(offsets[file_idx], max(len(strings) - 1, 0))] != 0, False)
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
