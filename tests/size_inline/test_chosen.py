"""read_function_index: the DWARF of chosen functions only, against the whole-file reader.

``perfab size`` reads the inline sites of the functions that changed and
nothing else.  Chosen every function, that reader must see exactly what
``read_inline_index`` sees; chosen one, only that function's sites.  gcc
writes ``.debug_aranges``, which finds a function's unit; clang does not,
and neither does a gcc build with the section removed: then each unit's
own ranges find it.
"""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from inline_helpers import section_extent, site_keys
from perfab.errors import UsageError
from perfab.size.elf import STT_FUNC, read_elf
from perfab.size.inline import read_function_index, read_inline_index


COMPILERS = ["gcc", "clang"]
DWARF = ["-gdwarf-4", "-gdwarf-5"]


def functions(exe) -> dict[str, int]:
    """Name -> ``.symtab`` index of every sized function symbol of ``exe``."""
    s = read_elf(exe).symbols
    return {s.name(i): i + 1 for i in range(len(s.value)) if s.type[i] == STT_FUNC and s.size[i] > 0}


def has_aranges(exe) -> bool:
    out = subprocess.run(["readelf", "-SW", str(exe)], check=True, capture_output=True, text=True).stdout
    return ".debug_aranges" in out


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dwarf", DWARF)
@pytest.mark.parametrize("source", ["sites.c", "nested.c", "cold.c"])
def test_every_function_chosen_reads_what_the_whole_file_reader_reads(build, cc, dwarf, source):
    exe = build(source, "-O2", "-g", dwarf, cc=cc)
    assert has_aranges(exe) == (cc == "gcc"), "the test expects gcc to write .debug_aranges and clang not to"
    whole, chosen = read_inline_index(exe), read_function_index(exe, functions(exe).values())
    assert site_keys(chosen) == site_keys(whole) and whole.sites
    assert (chosen.functions, chosen.covered_bytes, chosen.function_bytes) == (
        whole.functions, whole.covered_bytes, whole.function_bytes)


@pytest.mark.parametrize("cc", ["g++", "clang++"])
def test_cpp_functions_inside_a_namespace_unit_are_found(build, cc):
    exe = build("members.cc", "-O2", "-g", cc=cc)
    chosen = read_function_index(exe, [functions(exe)["_Z4worki"]])
    assert {(s.callee, s.caller, s.caller_symbol) for s in chosen.sites} == {("bump", "work", "_Z4worki")}
    assert len(chosen.sites) == 3


def keys_in(index, caller: str) -> Counter:
    """The site keys of ``index`` whose concrete function is ``caller``."""
    return Counter({k: n for k, n in site_keys(index).items() if k[1] == caller})


@pytest.mark.parametrize("cc", COMPILERS)
def test_one_function_chosen_reads_only_its_sites(build, cc):
    exe = build("sites.c", "-O2", "-g", cc=cc)
    two = read_function_index(exe, [functions(exe)["two"]])
    assert site_keys(two) == keys_in(read_inline_index(exe), "two") and len(two.sites) == 3
    assert two.functions == 1


@pytest.mark.parametrize("dwarf", DWARF)
def test_a_cold_part_chosen_reads_its_whole_function(build, dwarf):
    exe = build("cold.c", "-O2", "-g", dwarf)
    names = functions(exe)
    assert "check.cold" in names, "gcc did not split check(); the test lost its subject"
    cold = read_function_index(exe, [names["check.cold"]])
    both = read_function_index(exe, [names["check"], names["check.cold"]])
    assert site_keys(cold) == site_keys(both) == keys_in(read_inline_index(exe), "check")
    assert cold.functions == 1 and [s.callee for s in cold.sites] == ["report", "report"]


@pytest.mark.parametrize("dwarf", DWARF)
def test_units_are_found_by_their_ranges_without_aranges(build, tmp_path, dwarf):
    exe = build("nested.c", "-O2", "-g", dwarf)
    bare = tmp_path / "no-aranges"
    subprocess.run(["objcopy", "--remove-section=.debug_aranges", str(exe), str(bare)], check=True)
    assert has_aranges(exe) and not has_aranges(bare)
    chosen = read_function_index(bare, functions(bare).values())
    assert site_keys(chosen) == site_keys(read_inline_index(exe)) and chosen.sites


@pytest.mark.parametrize("cc", COMPILERS)
def test_relocatable_object_reads_as_the_whole_file_reader_does(build, cc):
    obj = build("nested.c", "-O2", "-g", cc=cc, link=False)
    chosen = read_function_index(obj, functions(obj).values())
    assert site_keys(chosen) == site_keys(read_inline_index(obj)) and chosen.sites


def test_nothing_chosen_reads_nothing(build):
    exe = build("sites.c", "-O2", "-g")
    empty = read_function_index(exe, [])
    assert (empty.sites, empty.functions, empty.function_bytes, empty.warnings) == ((), 0, 0, ())
    assert read_function_index(build("sites.c", "-O2", "-g0"), functions(exe).values()) is None


def test_corrupt_dwarf_is_a_usage_error(build, tmp_path):
    exe = build("sites.c", "-O2", "-g")
    data = bytearray(exe.read_bytes())
    off, size = section_extent(exe, ".debug_info")
    data[off + 12 : off + size : 7] = b"\xff" * len(range(off + 12, off + size, 7))
    bad = tmp_path / "corrupt"
    bad.write_bytes(bytes(data))
    with pytest.raises(UsageError, match=r"corrupt: no readable DWARF unit \(unit at .debug_info\+0x0: "):
        read_function_index(bad, functions(exe).values())
