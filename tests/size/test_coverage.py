"""Bytes of a section covered by its symbols: the union of their ranges, clipped to the section.

Checked against a plain interval merge in Python integers, on written ELF
files whose sections sit anywhere in the 64-bit address space and may be
larger than 2**40 bytes (``SHT_NOBITS``).
"""

from __future__ import annotations

from elfwriter import write_elf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfab.size.elf import read_elf
from perfab.size.symbols import read_symbols

PROGBITS, NOBITS, WA = 1, 8, 0x3
TOP = 2**64


def union_in(section: tuple[int, int], ranges: list[tuple[int, int]]) -> int:
    """Bytes of [lo, hi) covered by the half-open ``ranges``, by sorting and merging."""
    lo, hi = section
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in ranges if min(b, hi) > max(a, lo))
    total, reach = 0, lo
    for a, b in clipped:
        total += max(0, b - max(a, reach))
        reach = max(reach, b)
    return total


def covered(tmp_path, sections, symbols) -> dict[str, int]:
    f = read_elf(write_elf(tmp_path / "cov.o", 64, False, sections=sections, symbols=symbols))
    return {u.name: u.covered_bytes for u in read_symbols(f).sections}


def test_sections_past_2_40_bytes_do_not_mix_their_symbols(tmp_path):
    """The sweep once packed (section << 40) + offset into one int64: a 2 TiB .bss leaked into the next section."""
    sections = [(".text", PROGBITS, 0x6, 0x40), (".bss", NOBITS, WA, 2**41), (".lbss", NOBITS, WA, 2**41)]
    symbols = [("big", 2**40 + 2**39, 16, 0x11, 2), ("huge", 0, 2**40, 0x11, 3), ("main", 0, 0x40, 0x12, 1)]
    assert covered(tmp_path, sections, symbols) == {".text": 0x40, ".bss": 16, ".lbss": 2**40}


def test_symbols_at_the_top_of_the_address_space_are_clipped_not_wrapped(tmp_path):
    sections = [(".text", PROGBITS, 0x6, 0x40, TOP - 0x40), (".bss", NOBITS, WA, 0x100, TOP - 0x100)]
    symbols = [("last", TOP - 0x10, 0x20, 0x12, 1), ("wraps", TOP - 0x80, 2**63 - 1, 0x11, 2)]
    assert covered(tmp_path, sections, symbols) == {".text": 0x10, ".bss": 0x80}


ADDRS = st.sampled_from([0, 0x1000, 2**40, 2**63, TOP - 0x100])


@st.composite
def layouts(draw):
    """Two or three allocated sections and up to 8 symbols in or around them."""
    sections = []
    for k in range(draw(st.integers(2, 3))):
        nobits = draw(st.booleans())
        size = draw(st.sampled_from([0x10, 0x40, 2**41])) if nobits else draw(st.integers(1, 0x40))
        addr = min(draw(ADDRS), TOP - size)
        sections.append((f".s{k}", NOBITS if nobits else PROGBITS, WA, size, addr))
    symbols = []
    for j in range(draw(st.integers(1, 8))):
        k = draw(st.integers(0, len(sections) - 1))
        lo, size = sections[k][4], sections[k][3]
        value = draw(st.integers(max(0, lo - 0x20), min(TOP - 1, lo + min(size, 0x80) + 0x20)))
        length = draw(st.sampled_from([1, 4, 0x10, 0x30, 2**40, 2**63 - 1]))
        symbols.append((f"v{j}", value, length, 0x11, k + 1))
    return sections, symbols


@settings(derandomize=True, database=None, max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layouts())
def test_covered_bytes_equal_an_interval_merge(tmp_path, layout):
    sections, symbols = layout
    got = covered(tmp_path, sections, symbols)
    for k, (name, _, _, size, addr) in enumerate(sections):
        ranges = [(v, min(v + n, TOP)) for _, v, n, _, shndx in symbols if shndx == k + 1]
        assert got[name] == union_in((addr, addr + size), ranges), name
