"""read_inline_index on small C programs built here by gcc and clang."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from inline_helpers import dwarfdump_inline_bytes, readelf_inline_count, section_extent, site_keys, source_lines
from perfab.errors import UsageError
from perfab.size.inline import read_inline_index

COMPILERS = ["gcc", "clang"]
OPTS = ["-O2", "-Os"]
DWARF = ["-gdwarf-4", "-gdwarf-5"]


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("dwarf", DWARF)
def test_helper_called_from_seven_sites_is_seven_inline_sites(build, cc, opt, dwarf):
    exe = build("sites.c", opt, "-g", dwarf, cc=cc)
    index = read_inline_index(exe)
    helper = index.by_callee()["helper"]
    assert len(helper) == 7
    assert Counter(s.caller for s in helper) == {"one": 2, "two": 3, "three": 2}
    assert sorted(s.call_line for s in helper) == source_lines("sites.c", "helper(")
    assert {s.call_file for s in helper} == {"sites.c"}
    # Two volatile stores and some arithmetic: a few instructions, not zero, not a page.
    assert all(4 <= s.inclusive_bytes <= 64 for s in helper)
    assert all(s.exclusive_bytes == s.inclusive_bytes and s.parent is None for s in helper)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dwarf", DWARF)
def test_site_count_matches_readelf_and_bytes_match_llvm_dwarfdump(build, cc, dwarf):
    for source in ("sites.c", "nested.c", "cold.c"):
        exe = build(source, "-O2", "-g", dwarf, cc=cc)
        index = read_inline_index(exe)
        assert len(index.sites) == readelf_inline_count(exe) > 0
        assert Counter((s.callee, s.inclusive_bytes) for s in index.sites) == dwarfdump_inline_bytes(exe)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("opt", OPTS)
def test_nested_inlines_attribute_bytes_to_the_innermost(build, cc, opt):
    index = read_inline_index(build("nested.c", opt, "-g", cc=cc))
    by = {s.callee: s for s in index.sites if s.caller == "top"}
    outer, mid, inner = by["outer_a"], by["mid_b"], by["inner_c"]
    assert (outer.parent, mid.parent, inner.parent) == (None, "outer_a", "mid_b")
    assert inner.exclusive_bytes == inner.inclusive_bytes > 0
    assert mid.exclusive_bytes == mid.inclusive_bytes - inner.inclusive_bytes
    assert outer.exclusive_bytes == outer.inclusive_bytes - mid.inclusive_bytes
    assert sum(s.exclusive_bytes for s in index.sites) == index.covered_bytes
    assert 0 < index.covered_bytes < index.function_bytes


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("source", ["sites.c", "nested.c", "cold.c"])
def test_dwarf4_and_dwarf5_agree(build, cc, source):
    v4 = read_inline_index(build(source, "-O2", "-g", "-gdwarf-4", cc=cc))
    v5 = read_inline_index(build(source, "-O2", "-g", "-gdwarf-5", cc=cc))
    assert (v4.dwarf_versions, v5.dwarf_versions) == ((4,), (5,))
    assert site_keys(v4) == site_keys(v5)
    assert (v4.covered_bytes, v4.function_bytes) == (v5.covered_bytes, v5.function_bytes)


@pytest.mark.parametrize("compress", ["-gz=zlib", "-gz=zlib-gnu"])
@pytest.mark.parametrize("dwarf", DWARF)
def test_compressed_debug_sections_read_the_same(build, compress, dwarf):
    plain = read_inline_index(build("nested.c", "-O2", "-g", dwarf))
    packed_exe = build("nested.c", "-O2", "-g", dwarf, compress)
    packed = read_inline_index(packed_exe)
    assert site_keys(packed) == site_keys(plain) and plain.sites
    assert packed.covered_bytes == plain.covered_bytes


@pytest.mark.parametrize("dwarf", DWARF)
def test_cold_split_function_counts_both_parts(build, dwarf):
    exe = build("cold.c", "-O2", "-g", dwarf)
    index = read_inline_index(exe)
    reports = index.by_callee()["report"]
    assert len(reports) == 2 and all(s.caller == "check" for s in reports)
    sizes = symbol_sizes(exe)
    assert "check.cold" in sizes, "gcc did not split check(); the test lost its subject"
    total = sum(sizes.values())
    assert index.function_bytes == total


def symbol_sizes(exe) -> dict[str, int]:
    out = subprocess.run(["nm", "-S", str(exe)], check=True, capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT" and parts[3] in {"check", "check.cold", "fail", "main"}:
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dwarf", DWARF)
def test_relocatable_object_matches_linked_executable(build, cc, dwarf):
    obj = read_inline_index(build("nested.c", "-O2", "-g", dwarf, cc=cc, link=False))
    exe = read_inline_index(build("nested.c", "-O2", "-g", dwarf, cc=cc))
    assert site_keys(obj) == site_keys(exe) and obj.sites
    assert obj.function_bytes == exe.function_bytes


def test_emit_relocs_executable_is_not_relocated_again(build):
    plain = read_inline_index(build("cold.c", "-O2", "-g"))
    kept = read_inline_index(build("cold.c", "-O2", "-g", "-Wl,--emit-relocs"))
    assert site_keys(kept) == site_keys(plain) and plain.sites


def test_binary_without_debug_info_gives_none(build):
    assert read_inline_index(build("sites.c", "-O2", "-g0")) is None


def test_not_an_elf_file_is_a_usage_error(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello\n")
    with pytest.raises(UsageError, match="notes.txt: not an ELF"):
        read_inline_index(bogus)
    with pytest.raises(UsageError, match="no such file"):
        read_inline_index(tmp_path / "missing")


def test_threads_do_not_change_the_result(build):
    exe = build("sites.c", "-O2", "-g", "-gdwarf-5")
    assert site_keys(read_inline_index(exe, threads=1)) == site_keys(read_inline_index(exe, threads=2))


def test_corrupt_dwarf_is_a_usage_error(build, tmp_path):
    exe = build("sites.c", "-O2", "-g")
    data = bytearray(exe.read_bytes())
    for name in (".debug_abbrev", ".debug_info"):
        off, size = section_extent(exe, name)
        data[off + 12 : off + size : 7] = b"\xff" * len(range(off + 12, off + size, 7))
    bad = tmp_path / "corrupt"
    bad.write_bytes(bytes(data))
    with pytest.raises(UsageError, match=r"corrupt: no readable DWARF unit \(unit at .debug_info\+0x0: "):
        read_inline_index(bad)


@pytest.mark.parametrize("cc", ["g++", "clang++"])
def test_cpp_member_names_follow_the_specification(build, cc):
    index = read_inline_index(build("members.cc", "-O2", "-g", cc=cc))
    bump = index.by_callee()["bump"]
    assert len(bump) == 3
    assert {(s.caller, s.callee_linkage, s.caller_symbol) for s in bump} == {
        ("work", "_ZN2ns7Counter4bumpEi", "_Z4worki")
    }
