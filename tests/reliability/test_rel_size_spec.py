"""``perfab size`` on what the ELF specification forbids, on non-files and on decompression bombs.

Each object is compiled here by gcc and broken in one place that ``nm``
refuses too: a symbol table whose ``sh_link`` names itself, a symbol whose
``st_shndx`` is ``SHN_XINDEX`` with no ``SHT_SYMTAB_SHNDX`` section, a
section-name table without its final NUL.  Each is one line naming the
defect, exit 2.  A FIFO, a character device or a socket given as OLD or
NEW is refused before it is opened (a FIFO would block forever).  An
object whose compressed ``.debug_info`` declares 3 GiB is diffed by its
symbols, with a warning saying why its DWARF was not read.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from reliability_helpers import cli, write

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is installed by make test")
INVALID = r": not a valid ELF file \(truncated or corrupt\); rebuild or re-copy it$"


@pytest.fixture(scope="module")
def elves(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("elves")
    write(d / "a.c", "int f(int x) { return x * 3; }\nint main(int c, char **v) { return f(c); }\n")
    subprocess.run(["gcc", "-O2", "-g", "-o", str(d / "a"), str(d / "a.c")], check=True)
    subprocess.run(["gcc", "-O2", "-g", "-c", "-o", str(d / "a.o"), str(d / "a.c")], check=True)
    if subprocess.run(["gcc", "-O2", "-g", "-gz=zlib", "-c", "-o", str(d / "z.o"), str(d / "a.c")],
                      capture_output=True).returncode != 0:
        (d / "z.o").unlink(missing_ok=True)
    return d


def headers(data: bytes) -> list[dict]:
    """The ELF64 little-endian section headers with their names."""
    shoff, (shnum, shstrndx) = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<HH", data, 0x3C)
    names_at = struct.unpack_from("<Q", data, shoff + 64 * shstrndx + 24)[0]
    out = []
    for i in range(shnum):
        at = shoff + 64 * i
        name, typ, flags, addr, offset, size, link = struct.unpack_from("<IIQQQQI", data, at)
        start = names_at + name
        out.append({"at": at, "name": data[start:data.index(b"\0", start)].decode(), "type": typ, "flags": flags,
                    "offset": offset, "size": size, "link": link, "index": i})
    return out


def section(data: bytes, name: str) -> dict:
    return next(h for h in headers(data) if h["name"] == name)


def nm_refuses(path: Path) -> bool:
    """``nm`` fails on the file or complains about it on stderr."""
    if shutil.which("nm") is None:
        return True
    done = subprocess.run(["nm", str(path)], capture_output=True)
    return done.returncode != 0 or bool(done.stderr.strip())


def size(*argv):
    return cli("size", *map(str, argv))


def broken(elves: Path, tmp: Path, name: str, edit) -> Path:
    data = bytearray((elves / name).read_bytes())
    edit(data)
    return write(tmp / f"broken-{name}", bytes(data))


@pytest.mark.parametrize("name", ["a", "a.o"])
def test_symbol_table_linked_to_itself(elves, tmp_path, name):
    def edit(d):
        h = section(d, ".symtab")
        struct.pack_into("<I", d, h["at"] + 40, h["index"])
    bad = broken(elves, tmp_path, name, edit)
    assert nm_refuses(bad)
    size(elves / name, bad).one_line_error(
        2, rf"{bad}: the symbol table \(section \d+\) links to itself for its names, not to a SHT_STRTAB string "
           r"table" + INVALID)


@pytest.mark.parametrize("target", [".text", ".symtab"])
def test_symbol_table_linked_to_a_section_that_is_no_string_table(elves, tmp_path, target):
    def edit(d):
        struct.pack_into("<I", d, section(d, ".symtab")["at"] + 40, section(d, target)["index"])
    bad = broken(elves, tmp_path, "a", edit)
    size(elves / "a", bad).one_line_error(2, r"links to (itself|section \d+, of type \d+) for its names")


@pytest.mark.parametrize("name", ["a", "a.o"])
def test_symbol_with_xindex_but_no_shndx_section(elves, tmp_path, name):
    def edit(d):
        symtab = section(d, ".symtab")
        for at in range(symtab["offset"] + 24, symtab["offset"] + symtab["size"], 24):
            if struct.unpack_from("<H", d, at + 6)[0] not in (0, 0xFFF1):
                struct.pack_into("<H", d, at + 6, 0xFFFF)
                return
    bad = broken(elves, tmp_path, name, edit)
    assert nm_refuses(bad)
    size(elves / name, bad).one_line_error(
        2, rf"{bad}: symbol \d+ has st_shndx SHN_XINDEX but no SHT_SYMTAB_SHNDX section holds its section index"
           + INVALID)


@pytest.mark.parametrize("name", ["a", "a.o"])
def test_section_name_table_without_its_nul(elves, tmp_path, name):
    def edit(d):
        h = section(d, ".shstrtab")
        d[h["offset"] + h["size"] - 1] = ord("X")
    bad = broken(elves, tmp_path, name, edit)
    assert nm_refuses(bad)
    size(bad, elves / name).one_line_error(
        2, rf"{bad}: the section name table \(section \d+\) does not end in a NUL byte, as every ELF string table "
           r"must" + INVALID)


@pytest.mark.parametrize("which", ["OLD", "NEW"])
def test_a_fifo_is_refused_without_blocking(elves, tmp_path, which):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = (fifo, elves / "a") if which == "OLD" else (elves / "a", fifo)
    started = time.monotonic()
    size(*argv).one_line_error(
        2, rf"{fifo}: a FIFO, not a regular file; give the path of an ELF file \(copy a stream to a file first\)$")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("device, kind", [("/dev/null", "a character device"), ("/dev/zero", "a character device"),
                                          ("/dev/urandom", "a character device")])
def test_a_device_is_refused(elves, device, kind):
    size(elves / "a", device).one_line_error(2, rf"{device}: {kind}, not a regular file")


def test_a_socket_is_refused(elves, tmp_path):
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        size(path, elves / "a").one_line_error(2, rf"{path}: a socket, not a regular file")
    finally:
        server.close()


def test_a_symlink_to_a_fifo_is_refused(elves, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    size(elves / "a", link).one_line_error(2, rf"{link}: a FIFO, not a regular file")


def bomb(elves: Path, tmp: Path, declared: int) -> Path:
    """``z.o`` (DWARF compressed with zlib) whose .debug_info's Elf64_Chdr declares ``declared`` bytes."""
    if not (elves / "z.o").exists():
        pytest.skip("gcc cannot compress DWARF here (-gz=zlib)")

    def edit(d):
        h = section(d, ".debug_info")
        assert h["flags"] & 0x800, "gcc -gz did not compress .debug_info"
        struct.pack_into("<Q", d, h["offset"] + 8, declared)
    return broken(elves, tmp, "z.o", edit)


def test_a_decompression_bomb_is_not_inflated(elves, tmp_path):
    """.debug_info declaring 3 GiB in a few-KB object: the symbol diff, exit 0, one warning naming the bound."""
    bad = bomb(elves, tmp_path, 3 * 2**30)
    out = size(elves / "z.o", bad, "--format", "json")
    assert out.code == 0, out.err
    import json

    warnings = json.loads(out.out)["warnings"]
    hits = [w for w in warnings if "compressed sections declare 3.0 GiB uncompressed" in w]
    assert len(hits) == 1 and f"{bad}:" in hits[0]
    assert "its DWARF is not read: causes come from symbols alone" in hits[0]


def test_honest_compressed_dwarf_is_read(elves, tmp_path):
    """The bound is narrow: gcc's own compressed DWARF is read, no warning about inflation."""
    if not (elves / "z.o").exists():
        pytest.skip("gcc cannot compress DWARF here (-gz=zlib)")
    out = size(elves / "z.o", elves / "z.o", "--format", "json")
    assert out.code == 0, out.err
    assert "compressed sections declare" not in out.out


def test_the_bound_follows_the_machines_memory():
    """Half the available memory bounds inflation even when the factor would allow it."""
    from perfab.size.diff import inflation_refused
    from perfab.size.elf import ElfFile

    f = ElfFile("x", 64, False, "ET_REL", 62, (), None, True, file_bytes=2**30, inflated_bytes=8 * 2**30)
    assert inflation_refused(f, available=64 * 2**30) is None
    assert "beyond the bound of 4.0 GiB" in inflation_refused(f, available=8 * 2**30)
