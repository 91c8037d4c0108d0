"""Hostile inputs to ``perfab size``: one line naming the file and the fix (exit 2), or a diff with its warning.

The ELF files are compiled here by gcc; hostile ones are those files cut,
patched in one header, section or symbol field, built for another target,
stripped, without or with damaged DWARF, or not ELF at all.  DWARF only
explains a diff: without it, or with it unreadable, the symbol diff is
printed and the report says what it could not do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from reliability_helpers import cli, write

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is installed by make test")

A_C = "int f(int x) { return x * 3; }\nint main(int c, char **v) { return f(c); }\n"
B_C = ("int f(int x) { return x * 3 + 1; }\nint g(int x) { return x - 1; }\n"
       "int main(int c, char **v) { return f(c) + g(c); }\n")
C_C = ("static inline int cube(int x) { return x * x * x; }\n"
       "int h(int x) { return cube(x) + 2; }\n")
INVALID = r"not a valid ELF file \(truncated or corrupt\); rebuild or re-copy it$"
NOT_ELF = r"not an ELF file \(bad magic\); give a binary, shared object or \.o file$"


@pytest.fixture(scope="module")
def elves(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("elves")
    write(d / "a.c", A_C)
    write(d / "b.c", B_C)
    for name, flags in (("a", ["-g"]), ("b", ["-g"]), ("a-nodebug", []), ("b-nodebug", [])):
        subprocess.run(["gcc", "-O2", *flags, "-o", str(d / name), str(d / f"{name[0]}.c")], check=True)
    subprocess.run(["gcc", "-O2", "-g", "-c", "-o", str(d / "b.o"), str(d / "b.c")], check=True)
    write(d / "c.c", C_C)
    subprocess.run(["gcc", "-O2", "-g", "-o", str(d / "b-2cu"), str(d / "b.c"), str(d / "c.c")], check=True)
    for name in ("a", "b"):
        subprocess.run(["strip", "-o", str(d / f"{name}-stripped"), str(d / name)], check=True)
    return d


def patched(elves: Path, tmp: Path, edit) -> Path:
    data = bytearray((elves / "a").read_bytes())
    edit(data)
    return write(tmp / "patched", bytes(data))


def size(*argv) -> "object":
    return cli("size", *map(str, argv))


def section_header(data: bytes, name: str) -> int:
    """File offset of the ELF64 little-endian section header called ``name``."""
    shoff, (shnum, shstrndx) = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<HH", data, 0x3C)
    names_at = struct.unpack_from("<Q", data, shoff + 64 * shstrndx + 24)[0]
    for i in range(shnum):
        at = shoff + 64 * i
        start = names_at + struct.unpack_from("<I", data, at)[0]
        if data[start : data.index(b"\0", start)].decode() == name:
            return at
    raise LookupError(name)


def section_span(data: bytes, name: str) -> tuple[int, int]:
    """(sh_offset, sh_size) of section ``name``."""
    return struct.unpack_from("<QQ", data, section_header(data, name) + 24)


def symbol_entry(data: bytes, name: str) -> int:
    """File offset of the ``.symtab`` entry of ``name``."""
    symtab, size = section_span(data, ".symtab")
    strtab = section_span(data, ".strtab")[0]
    for at in range(symtab + 24, symtab + size, 24):
        start = strtab + struct.unpack_from("<I", data, at)[0]
        if data[start : data.index(b"\0", start)] == name.encode():
            return at
    raise LookupError(name)


@pytest.mark.parametrize("case, content, pattern", [
    ("empty", b"", r"cannot read it \(cannot mmap an empty file\); give a readable, non-empty ELF file$"),
    ("text", b"int main() {}\n", NOT_ELF),
    ("pe-executable", b"MZ\x90\x00" + bytes(200), NOT_ELF),
    ("mach-o", b"\xcf\xfa\xed\xfe" + bytes(200), NOT_ELF),
    ("magic-only", b"\x7fELF", NOT_ELF),
    ("ar-archive", b"!<arch>\n" + bytes(60), r"an ar archive \(\.a\), not one ELF file; diff the linked binary"),
])
def test_not_an_elf_file(elves, tmp_path, case, content, pattern):
    """NEW is not an ELF file at all: exit 2, the file named, what to give instead."""
    bad = write(tmp_path / case, content)
    size(elves / "a", bad).one_line_error(2, rf"^perfab size: {bad}: " + pattern)


@pytest.mark.parametrize("case", ["header-only", "cut-in-half"])
def test_truncated_elf_names_the_section_header_table(elves, tmp_path, case):
    """An ELF file cut short (a copy interrupted): the section header table lies beyond its end."""
    data = (elves / "a").read_bytes()
    bad = write(tmp_path / case, data[:64] if case == "header-only" else data[: len(data) // 2])
    size(elves / "a", bad).one_line_error(
        2, rf"{bad}: section header table at offset \d+ lies beyond the end of the file \(\d+ bytes\): " + INVALID)


@pytest.mark.parametrize("case, edit, pattern", [
    ("e_shoff-2^63", lambda d: struct.pack_into("<Q", d, 0x28, 2**63),
     r"section header table at offset 9223372036854775808 lies beyond the end of the file"),
    ("e_shoff-2^64-1", lambda d: struct.pack_into("<Q", d, 0x28, 2**64 - 1),
     r"section header table at offset 18446744073709551615 lies beyond the end of the file"),
    ("e_shstrndx-past-the-end", lambda d: struct.pack_into("<H", d, 0x3E, 0xFFF0),
     r"section name table index \(e_shstrndx\) 65520 is past the last of the \d+ sections"),
    ("ei_data-flipped", lambda d: d.__setitem__(5, 2),
     r"section header entry size is 16384 bytes, not the 64 of ELF64"),
    ("e_shnum-past-the-end", lambda d: struct.pack_into("<H", d, 0x3C, 0xFFFF),
     r"section header table \(65535 entries\) at offset \d+, 4194240 bytes long, runs past the end of the file"),
    (".text-sh_size-2^63", lambda d: struct.pack_into("<Q", d, section_header(d, ".text") + 32, 2**63),
     r"section \d+ \(\.text\) at offset \d+, 9223372036854775808 bytes long, runs past the end of the file"),
    (".bss-sh_size-2^63", lambda d: struct.pack_into("<Q", d, section_header(d, ".bss") + 32, 2**63),
     r"section \d+ \(\.bss\) is 9223372036854775808 bytes, larger than any address space"),
    ("st_size-2^64-1", lambda d: struct.pack_into("<Q", d, symbol_entry(d, "f") + 16, 2**64 - 1),
     r"symbol \d+ \(f\) is 18446744073709551615 bytes, larger than any address space"),
])
def test_one_header_field_impossible(elves, tmp_path, case, edit, pattern):
    """One ELF header field set to a value no valid file holds: the field named, never an OverflowError."""
    bad = patched(elves, tmp_path, edit)
    size(elves / "a", bad).one_line_error(2, pattern + ".*" + INVALID)


def test_unknown_elf_class(elves, tmp_path):
    """EI_CLASS 3 (neither 32 nor 64 bit): the class named, the file called corrupt."""
    bad = patched(elves, tmp_path, lambda d: d.__setitem__(4, 3))
    size(elves / "a", bad).one_line_error(2, r"unknown ELF class 3 or data encoding 1; the file is corrupt$")


def test_other_machine_is_a_warning_and_the_diff(elves, tmp_path):
    """e_machine AArch64 against x86-64: exit 0, one warning line on stderr, the report still printed."""
    other = patched(elves, tmp_path, lambda d: struct.pack_into("<H", d, 0x12, 183))
    out = size(elves / "a", other)
    assert out.code == 0 and out.out.strip()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfab size: warning: ") and "different machine" in lines[0]


def test_same_file_twice_is_an_empty_diff(elves):
    """OLD and NEW the same file: exit 0, nothing grew or shrank."""
    out = size("--format", "json", elves / "a", elves / "a")
    assert out.code == 0 and out.err == ""
    doc = json.loads(out.out)
    assert all(t["rows"] == [] and t["up_bytes"] == t["down_bytes"] == 0 for t in doc["tables"])
    assert doc["families"] == [] and all(s["delta_bytes"] == 0 for s in doc["sections"])
    assert "add/remove: 0/0 grow/shrink: 0/0 up/down: 0/0 (0)" in size(elves / "a", elves / "a").out


def test_stripped_binaries_are_refused_with_the_fix(elves):
    """Both sides stripped: nothing to compare per symbol; asks for unstripped builds."""
    size(elves / "a-stripped", elves / "b-stripped").one_line_error(
        2, r"a-stripped: no \.symtab \(stripped\): nothing to compare symbol by symbol; give unstripped builds")


def test_no_debug_info_still_diffs_by_symbols(elves):
    """Built without -g: the symbol diff is printed (causes from symbols alone), exit 0."""
    out = size(elves / "a-nodebug", elves / "b-nodebug")
    assert out.code == 0 and "Traceback" not in out.err
    assert any(line.split()[:1] == ["g"] for line in out.out.splitlines()), out.out  # the added function


def test_object_file_against_executable(elves):
    """A .o against a linked binary (a mistaken pair): still a diff, no traceback."""
    out = size(elves / "a", elves / "b.o")
    assert out.code == 0 and out.out and "Traceback" not in out.err


@pytest.mark.parametrize("case", ["missing", "directory", "symlink-loop", "dev-null"])
def test_path_that_is_not_a_readable_file(elves, tmp_path, case):
    """NEW missing, a directory, a symlink loop, or a character device: one line, exit 2."""
    if case == "symlink-loop":
        os.symlink(tmp_path / "y", tmp_path / "x")
        os.symlink(tmp_path / "x", tmp_path / "y")
    target = {"missing": tmp_path / "nope", "directory": tmp_path, "symlink-loop": tmp_path / "x",
              "dev-null": Path("/dev/null")}[case]
    want = {"missing": r"no such file; give the path of an ELF binary or object$",
            "directory": r"cannot read it \(Is a directory\)",
            "symlink-loop": r"cannot read it \(Too many levels of symbolic links\)",
            "dev-null": r"a character device, not a regular file; give the path of an ELF file"}[case]
    size(elves / "a", target).one_line_error(2, want)


@pytest.mark.parametrize("argv, pattern", [
    (["--bogus", "A", "B"], r"unrecognized arguments: --bogus; see `perfab size --help`$"),
    (["A"], r"the following arguments are required: NEW; see `perfab size --help`$"),
    ([], r"the following arguments are required: OLD, NEW"),
    (["--limit", "-1", "A", "B"], r"--limit must be >= 0 \(0 prints every row\)$"),
    (["--limit", "x", "A", "B"], r"argument --limit: invalid int value: 'x'"),
    (["--format", "pdf", "A", "B"], r"argument --format: invalid choice: 'pdf'"),
], ids=["unknown-option", "one-file", "no-files", "negative-limit", "limit-not-a-number", "unknown-format"])
def test_usage_errors(elves, argv, pattern):
    """Bad command lines: exit 2, one line, pointing at --help where it helps."""
    argv = [str(elves / "a") if a == "A" else str(elves / "b") if a == "B" else a for a in argv]
    size(*argv).one_line_error(2, pattern)


def test_html_into_a_missing_directory(elves, tmp_path):
    """-o into a directory that does not exist: one line naming the path; nothing half-written."""
    target = tmp_path / "nodir" / "size.html"
    size("--format", "html", "-o", target, elves / "a", elves / "b").one_line_error(
        2, rf"cannot write the report to {target}: No such file or directory; give a writable path$")
    assert not target.parent.exists()


@pytest.fixture(scope="module")
def objects(elves) -> tuple[Path, Path]:
    """``a.c`` compiled to an ELF32 i386 object (gcc -m32) and to an ELF64 x86-64 one."""
    o32, o64 = elves / "a32.o", elves / "a64.o"
    if subprocess.run(["gcc", "-m32", "-O2", "-c", "-o", str(o32), str(elves / "a.c")], capture_output=True).returncode:
        pytest.skip("gcc -m32 cannot build here (no 32-bit multilib)")
    subprocess.run(["gcc", "-O2", "-c", "-o", str(o64), str(elves / "a.c")], check=True)
    return o32, o64


def test_32_bit_against_64_bit_is_refused_with_the_flag_that_allows_it(objects):
    """ELF32 i386 against ELF64 x86-64: exit 2, both targets described, --allow-mismatch named."""
    o32, o64 = objects
    size(o32, o64).one_line_error(
        2, rf"^perfab size: {o32} is ELF32 little-endian i386 \(e_machine 3\) and {o64} is ELF64 little-endian "
           r"x86-64 \(e_machine 62\): different machine and class: a function-by-function size diff across targets "
           r"is meaningless; give two builds for the same target, or pass --allow-mismatch to diff them anyway$")


def test_32_bit_against_64_bit_allowed_is_a_warning_and_the_diff(objects):
    """The same pair with --allow-mismatch: exit 0, the class warning on stderr and atop the report."""
    o32, o64 = objects
    out = size("--allow-mismatch", o32, o64)
    assert out.code == 0 and "Traceback" not in out.err
    warning = (f"{o32} is ELF32 little-endian i386 (e_machine 3) and {o64} is ELF64 little-endian x86-64 "
               "(e_machine 62): different machine and class: each function row compares code built for different "
               "targets; only the totals are comparable")
    assert out.err == f"perfab size: warning: {warning}\n"
    assert out.out.startswith(f"WARNING: {warning}\n") and "Total: Before=" in out.out


def test_inline_causes_need_dwarf_on_both_sides(elves):
    """OLD with -g, NEW without: the diff and its causes from symbols, and a note naming NEW's missing -g."""
    with_dwarf = size(elves / "a", elves / "b")
    assert "now inlines g (1 site)" in with_dwarf.out and "Inline sites that changed:" in with_dwarf.out
    out = size(elves / "a", elves / "b-nodebug")
    assert out.code == 0 and out.err == ""
    assert "now inlines" not in out.out and "Inline sites that changed:" not in out.out
    assert out.out.endswith(f"\nNot done:\n- {elves / 'b-nodebug'}: no debug info: inlined/uninlined causes "
                            "unavailable; build with -g\n")
    assert any(line.split()[:1] == ["g"] for line in out.out.splitlines())  # the symbol diff is all there


@pytest.mark.parametrize("fill", [b"\x00", b"\xff"], ids=["zeroed", "all-0xff"])
def test_debug_info_overwritten_leaves_the_symbol_diff_and_says_so(elves, tmp_path, fill):
    """NEW's .debug_info bytes overwritten: exit 0, the symbol diff printed, the unreadable DWARF noted."""
    data = bytearray((elves / "b").read_bytes())
    offset, length = section_span(data, ".debug_info")
    data[offset : offset + length] = fill * length
    bad = write(tmp_path / "b-bad-dwarf", bytes(data))
    out = size(elves / "a", bad)
    assert out.code == 0 and out.err == "", out.err
    assert any(line.split()[:1] == ["g"] for line in out.out.splitlines())
    assert "Inline sites that changed:" not in out.out
    note = out.out.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(rf"- inline causes unavailable: {bad}: bad \.debug_info unit header: .+; "
                        r"give an ELF file built with -g", note), note


def test_one_unreadable_dwarf_unit_is_named_and_the_others_used(elves, tmp_path):
    """The second compile unit's abbreviation offset past .debug_abbrev: the first unit's inline sites
    still explain the diff, and the report names the unit it skipped."""
    data = bytearray((elves / "b-2cu").read_bytes())
    offset = section_span(data, ".debug_info")[0]
    second = offset + 4 + struct.unpack_from("<I", data, offset)[0]
    assert struct.unpack_from("<H", data, second + 4)[0] == 5  # DWARF 5: abbrev offset after unit type and address size
    struct.pack_into("<I", data, second + 8, 0xFFFFF0)
    bad = write(tmp_path / "b-bad-unit", bytes(data))
    out = size(elves / "a", bad)
    assert out.code == 0 and out.err == "", out.err
    assert "Inline sites that changed:" in out.out and "now inlines g (1 site)" in out.out
    note = out.out.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(rf"- {bad}: 1 DWARF unit\(s\) unreadable \(unit at \.debug_info\+{second - offset:#x}: .+\): "
                        r"inline causes come from the other units only", note), note


def test_html_to_stdout_is_one_self_contained_page(elves):
    """--format html without -o: exit 0, nothing on stderr, one page on stdout that loads nothing from outside."""
    out = size("--format", "html", elves / "a", elves / "b")
    assert out.code == 0 and out.err == ""
    assert out.out.startswith("<!DOCTYPE html>") and out.out.rstrip().endswith("</html>")
    assert not re.search(r"<script[^>]*\ssrc=|<link[^>]*rel=\"stylesheet\"", out.out)
