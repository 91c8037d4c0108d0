"""A minimal ELF writer for the reader's tests: the layouts no compiler here emits.

gcc on this machine emits ELF64 and (with -m32 -c) ELF32 little-endian
only; big-endian files are written here from the System V ABI layouts,
with a few sections and symbols whose values the tests then read back.
"""

from __future__ import annotations

import struct
from pathlib import Path

# (name, sh_type, sh_flags, size[, sh_addr])
SECTIONS = [(".text", 1, 0x6, 0x40), (".data", 1, 0x3, 0x10), (".bss", 8, 0x3, 0x20)]
# (name, value, size, info, shndx): locals (FILE a.c, foo, FILE b.c, foo) then globals
SYMBOLS = [
    ("a.c", 0, 0, 0x04, 0xFFF1),
    ("foo", 0x00, 0x10, 0x02, 1),
    ("b.c", 0, 0, 0x04, 0xFFF1),
    ("foo", 0x10, 0x08, 0x02, 1),
    ("main", 0x18, 0x28, 0x12, 1),
    ("table", 0x0, 0x10, 0x11, 2),
    ("buf", 0x0, 0x20, 0x11, 3),
]


def write_elf(
    path: Path, bits: int, big: bool, etype: int = 1, grow: dict[str, int] | None = None,
    sections: list | None = None, symbols: list | None = None,
) -> Path:
    """Write an ELF file with SECTIONS and SYMBOLS (or the ``sections``/``symbols`` given,
    same layout; PROGBITS sections hold ``size`` bytes, the first one executable);
    ``grow``: extra bytes per global name; return ``path``."""
    grow = grow or {}
    SECTIONS = sections or globals()["SECTIONS"]
    SYMBOLS = symbols or globals()["SYMBOLS"]
    e = ">" if big else "<"
    shstr = b"\0" + b"\0".join(n.encode() for n, *_ in SECTIONS) + b"\0.symtab\0.strtab\0.shstrtab\0"
    strtab = b"\0" + b"\0".join(n.encode() for n, *_ in SYMBOLS) + b"\0"
    sym_fmt = e + ("IBBHQQ" if bits == 64 else "IIIBBH")
    syms = [b"\0" * struct.calcsize(sym_fmt)]
    for name, value, size, info, shndx in SYMBOLS:
        size += grow.get(name, 0) if info & 0xF0 else 0
        off = strtab.index(b"\0" + name.encode() + b"\0") + 1
        fields = (off, info, 0, shndx, value, size) if bits == 64 else (off, value, size, info, 0, shndx)
        syms.append(struct.pack(sym_fmt, *fields))
    symtab = b"".join(syms)
    ehsize = 64 if bits == 64 else 52
    body = bytearray(b"\0" * ehsize)
    headers = [(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for name, typ, flags, size, *addr in SECTIONS:  # an optional 5th item is sh_addr
        headers.append((shstr.index(name.encode() + b"\0"), typ, flags, addr[0] if addr else 0, len(body), size,
                        0, 0, 16, 0))
        if typ != 8:  # SHT_NOBITS occupies no file bytes
            body += (b"\x90" if flags & 0x4 else b"\1") * size
    blobs = {}
    for label, blob in (("symtab", symtab), ("strtab", strtab), ("shstrtab", shstr)):
        blobs[label] = (len(body), len(blob))
        body += blob
    shoff = len(body)
    nsec = len(headers)
    headers.append((shstr.index(b".symtab"), 2, 0, 0, *blobs["symtab"], nsec + 1, 5, 8, len(syms[0])))
    headers.append((shstr.index(b".strtab"), 3, 0, 0, *blobs["strtab"], 0, 0, 1, 0))
    headers.append((shstr.index(b".shstrtab"), 3, 0, 0, *blobs["shstrtab"], 0, 0, 1, 0))
    sh_fmt = e + ("IIQQQQIIQQ" if bits == 64 else "IIIIIIIIII")
    for h in headers:
        body += struct.pack(sh_fmt, *h)
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, 2 if big else 1, 1]) + b"\0" * 9
    eh_fmt = e + ("HHIQQQIHHHHHH" if bits == 64 else "HHIIIIIHHHHHH")
    shentsize = struct.calcsize(sh_fmt)
    body[0:ehsize] = ident + struct.pack(eh_fmt, etype, 2 if big else 3, 1, 0, 0, shoff, 0, ehsize, 0, 0, shentsize,
                                         len(headers), len(headers) - 1)
    path.write_bytes(bytes(body))
    return path
