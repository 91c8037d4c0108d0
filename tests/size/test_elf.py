"""The ELF reader against readelf and nm on real and written files."""

from __future__ import annotations

import subprocess

import pytest
from size_helpers import compile_c
from elfwriter import write_elf

from perfab.errors import UsageError
from perfab.size.compat import nm_letters
from perfab.size.elf import read_elf


def readelf_symbols(path) -> list[tuple[str, int, int]]:
    """(name, value, size) of every .symtab entry but the first, from ``readelf -sW``."""
    out = subprocess.run(["readelf", "-sW", str(path)], capture_output=True, text=True, check=True).stdout
    rows, in_symtab = [], False
    for line in out.splitlines():
        if line.startswith("Symbol table"):
            in_symtab = "'.symtab'" in line
            continue
        parts = line.split()
        if in_symtab and parts and parts[0].endswith(":") and parts[0][:-1].isdigit() and parts[0] != "0:":
            rows.append((parts[7] if len(parts) > 7 else "", int(parts[1], 16), int(parts[2], 0)))
    return rows


def nm_size_sort(path) -> list[tuple[str, int, str]]:
    """(name, size, letter) from ``nm --size-sort``, sorted."""
    out = subprocess.run(["nm", "--size-sort", str(path)], capture_output=True, text=True, check=True).stdout
    return sorted((n, int(s, 16), t) for s, t, n in (line.split() for line in out.splitlines() if line.strip()))


def test_linked_executable_symbols_match_readelf(build):
    path = build("gcc", "-O2", "NEW")
    f = read_elf(path)
    assert (f.elf_class, f.big_endian, f.elf_type, f.has_debug_info) == (64, False, "ET_DYN", True)
    ours = [(n, v, s) for n, v, s in zip(f.symbols.names, f.symbols.value.tolist(), f.symbols.size.tolist()) if s]
    theirs = [(n, v, s) for n, v, s in readelf_symbols(path) if s]
    assert sorted(ours) == sorted(theirs)


def test_local_symbols_know_their_source_file(build):
    f = read_elf(build("gcc", "-O2", "NEW"))
    helpers = [file for name, file in zip(f.symbols.names, f.symbols.file) if name == "helper"]
    assert sorted(helpers) == ["prog.c", "util.c"]
    main = f.symbols.names.index("main")
    assert f.symbols.file[main] is None  # globals belong to no FILE symbol


@pytest.mark.parametrize("bits,big", [(32, False), (32, True), (64, False), (64, True)])
def test_written_files_of_each_class_and_byte_order(tmp_path, bits, big):
    f = read_elf(write_elf(tmp_path / "x.o", bits, big))
    assert (f.elf_class, f.big_endian, f.elf_type) == (bits, big, "ET_REL")
    assert [s.name for s in f.sections][1:4] == [".text", ".data", ".bss"]
    assert f.symbols.names == ["a.c", "foo", "b.c", "foo", "main", "table", "buf"]
    assert f.symbols.size.tolist() == [0, 16, 0, 8, 40, 16, 32]
    assert f.symbols.file[:4] == ["a.c", "a.c", "b.c", "b.c"]


@pytest.mark.parametrize("bits,big", [(32, True), (64, True)])
def test_nm_letters_match_nm_on_big_endian(tmp_path, bits, big):
    path = write_elf(tmp_path / "x.o", bits, big)
    f = read_elf(path)
    idx, letters = nm_letters(f)
    ours = sorted((f.symbols.names[i], int(f.symbols.size[i]), str(c)) for i, c in zip(idx.tolist(), letters))
    assert ours == nm_size_sort(path)


def test_elf32_object_from_gcc_m32(tmp_path):
    src = tmp_path / "m32.c"  # no #include: this machine has no 32-bit libc headers
    src.write_text("static int helper(int x) { return x * 3; }\nint table[8];\n"
                   "int use(int x) { return helper(x) + table[x & 7]; }\n")
    obj = compile_c(tmp_path / "m32.o", "-m32", "-O2", "-g", "-c", str(src))
    f = read_elf(obj)
    assert (f.elf_class, f.elf_type) == (32, "ET_REL")
    idx, letters = nm_letters(f)
    ours = sorted((f.symbols.names[i], int(f.symbols.size[i]), str(c)) for i, c in zip(idx.tolist(), letters))
    assert ours == nm_size_sort(obj)


def test_not_an_elf_file_is_a_usage_error(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    with pytest.raises(UsageError, match="not an ELF file"):
        read_elf(p)


def test_missing_and_empty_files_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        read_elf(tmp_path / "absent")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(UsageError):
        read_elf(tmp_path / "empty")


def test_truncated_file_is_a_usage_error(tmp_path, build):
    data = build("gcc", "-O2", "OLD").read_bytes()
    cut = tmp_path / "cut"
    cut.write_bytes(data[:200])
    with pytest.raises(UsageError, match="truncated or corrupt"):
        read_elf(cut)


def test_stripped_file_has_no_symbols(tmp_path, build):
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(build("gcc", "-O2", "OLD"))], check=True)
    f = read_elf(stripped)
    assert f.symbols is None and not f.has_debug_info


@pytest.mark.parametrize("bits,big", [(32, True), (64, True)])
def test_big_endian_pair_diffs(tmp_path, bits, big):
    from perfab.size import diff_files

    old = write_elf(tmp_path / "old.o", bits, big)
    new = write_elf(tmp_path / "new.o", bits, big, grow={"main": 8})
    d = diff_files(old, new)
    assert [(f.name, f.delta_bytes, f.cause.kind) for f in d.families] == [("main", 8, "body")]
    assert d.tables[0].rows == (("main", 40, 48, 8),)


def test_position_dependent_executable_is_et_exec(tmp_path):
    from size_helpers import SRC

    exe = compile_c(tmp_path / "nopie", "-O2", "-no-pie", str(SRC / "prog.c"), str(SRC / "util.c"))
    f = read_elf(exe)
    assert f.elf_type == "ET_EXEC"
    idx, letters = nm_letters(f)
    ours = sorted((f.symbols.names[i], int(f.symbols.size[i]), str(c)) for i, c in zip(idx.tolist(), letters))
    assert ours == nm_size_sort(exe)
