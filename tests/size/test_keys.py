"""Name hashes computed in numpy equal the hash of the name stripped in Python."""

from __future__ import annotations

import numpy as np
import pytest

from perfab.size.elf import read_elf
from perfab.size.families import family_base
from perfab.size.keys import hash_str, name_hashes
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
