"""Family names, members and the split of same-named statics."""

from __future__ import annotations

import pytest

from perfab.size.families import assign_families, clone_label, family_base


@pytest.mark.parametrize(
    "name,base",
    [
        ("foo", "foo"),
        ("foo.cold", "foo"),
        ("foo.part", "foo"),
        ("foo.part.0", "foo"),
        ("foo.isra.0", "foo"),
        ("foo.constprop.0.isra.0", "foo"),
        ("foo.part.0.cold", "foo"),
        ("foo.lto_priv.0", "foo"),
        ("foo.llvm.12345678901234", "foo"),
        ("foo.localalias", "foo"),
        ("__pfx_foo", "foo"),
        ("__cfi_foo", "foo"),
        ("__pfx_foo.cold", "foo"),
        ("__func__.3", "__func__"),
        ("__pfx_", "__pfx_"),
        (".L.str", ".L.str"),
        ("foo.bar", "foo.bar"),
        ("stderr@GLIBC_2", "stderr@GLIBC_2"),
    ],
)
def test_family_base(name, base):
    assert family_base(name) == base


def test_clone_label():
    assert clone_label("foo", "foo") == ""
    assert clone_label("foo.isra", "foo") == ".isra"
    assert clone_label("__pfx_foo", "foo") == "__pfx_"


def test_statics_in_several_files_split_by_file_globals_apart():
    keys = {("helper", "a.c"), ("helper", "b.c"), ("helper.isra", "b.c"), ("helper", None), ("main", None)}
    fam = assign_families(keys)
    assert fam[("helper", "a.c")] == ("helper", "a.c")
    assert fam[("helper", "b.c")] == fam[("helper.isra", "b.c")] == ("helper", "b.c")
    assert fam[("helper", None)] == ("helper", None)
    assert fam[("main", None)] == ("main", None)


def test_a_global_and_its_local_clone_share_one_family():
    fam = assign_families({("copy_process", None), ("copy_process.cold", "fork.c"), ("__pfx_copy_process", None)})
    assert set(fam.values()) == {("copy_process", None)}
