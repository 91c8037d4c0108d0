"""Name hashes (compiled, and numpy's where the compiled reader is missing) equal the hash of the name stripped in
Python, and each other."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfab.size.elf import read_elf
from perfab.size.families import family_base
from perfab.size.keys import hash_str, name_hashes, numpy_name_hashes
from perfab.size.symbols import strip_name

TRICKY = [
    "foo", "foo.isra.0", "foo.constprop.0.isra.0", "foo.part.12.cold", "__func__.3", "a.1.2", "x..1", "x.",
    "1.2.3", "a.b5", "a.5b", "__pfx_foo.cold", "__cfi_bar", "__pfx_", "__UNIQUE_ID_ddebug384",
    "__UNIQUE_ID_ddebug503.14", "__UNIQUE_ID_", "__UNIQUE_ID_7", "café.1", "lookup",
]


def _strtab(names: list[str]) -> tuple[bytes, np.ndarray]:
    blob, offsets = b"\0", []
    for n in names:
        offsets.append(len(blob))
        blob += n.encode() + b"\0"
    return blob, np.array(offsets, dtype=np.int64)


def _head(name: str) -> str:
    """Documented head: no __pfx_/__cfi_, cut at the first '.' of the name as stored."""
    stem = name[6:] if name.startswith(("__pfx_", "__cfi_")) and len(name) > 6 else name
    return strip_name(stem.split(".")[0])


@pytest.mark.parametrize("name", TRICKY)
def test_hash_of_each_tricky_name(name):
    blob, offsets = _strtab(["padding.7", name, "tail.9"])
    h = name_hashes(blob, offsets)
    assert int(h.name[1]) == hash_str(strip_name(name))
    assert int(h.head[1]) == hash_str(_head(name))


def test_strip_name():
    assert strip_name("__UNIQUE_ID_ddebug503.14") == "__UNIQUE_ID_ddebug"
    assert strip_name("foo.constprop.0.isra.0") == "foo.constprop.isra"
    assert strip_name("__UNIQUE_ID_") == "__UNIQUE_ID_"


def test_every_symbol_of_a_built_binary(build):
    s = read_elf(build("gcc", "-O2", "NEW")).symbols
    keep = np.flatnonzero(s.name_offset != 0)
    h = name_hashes(s.strtab, s.name_offset[keep])
    names = [s.name(int(i)) for i in keep]
    assert [int(x) for x in h.name] == [hash_str(strip_name(n)) for n in names]
    bases = {n: family_base(strip_name(n)) for n in names}
    assert all(int(hd) == hash_str(_head(n)) for hd, n in zip(h.head, names))
    assert bases["get_tag.isra.0"] == "get_tag"


def test_regression_unique_id_counter_before_a_dot_number():
    """vmlinux has ``__UNIQUE_ID_ddebug503.14``: the counter sits before an already-removed ``.14``."""
    blob, offsets = _strtab(["__UNIQUE_ID_ddebug503.14", "__UNIQUE_ID_ddebug7"])
    h = name_hashes(blob, offsets)
    assert int(h.name[0]) == int(h.name[1]) == hash_str("__UNIQUE_ID_ddebug")


needs_native = pytest.mark.skipif(importlib.util.find_spec("perfab_native") is None, reason="perfab_native not built")


def _same(strtab: bytes, offsets: np.ndarray, **flags) -> None:
    """The compiled hashes equal numpy's, field by field."""
    native, slow = name_hashes(strtab, offsets, **flags), numpy_name_hashes(strtab, offsets, **flags)
    for field in ("name", "head", "odd"):
        assert getattr(native, field).tolist() == getattr(slow, field).tolist(), field


@needs_native
@pytest.mark.parametrize("flags", [{}, {"fold_counters": False, "heads": False}])
def test_compiled_hashes_equal_numpys_on_every_symbol_of_a_built_binary(build, flags):
    for variant in ("OLD", "NEW"):
        s = read_elf(build("gcc", "-O2", variant)).symbols
        _same(s.strtab, s.name_offset, **flags)


@needs_native
def test_compiled_hashes_equal_numpys_on_tricky_names_at_every_offset():
    """Every offset of the table: names, their tails (suffix sharing) and offsets inside .NUMBER runs."""
    blob, _ = _strtab(TRICKY + ["x.12", "a__UNIQUE_ID_b3.4"])
    offsets = np.arange(-2, len(blob) + 2, dtype=np.int64)
    _same(blob, offsets)
    _same(blob, offsets, fold_counters=False)
    _same(blob[:-1], offsets)  # the last name runs to the end of the table without a NUL


@needs_native
@settings(derandomize=True, database=None, max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="._0123456789abUNIQUE_IDpfxc", max_size=24), min_size=1, max_size=12), st.data())
def test_compiled_hashes_equal_numpys_on_random_tables(names, data):
    blob, offsets = _strtab(names)
    extra = data.draw(st.lists(st.integers(0, len(blob) - 1), max_size=8))
    _same(blob, np.concatenate((offsets, np.array(extra, dtype=np.int64))))
