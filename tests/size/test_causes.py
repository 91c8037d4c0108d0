"""The cause logic on inline indexes built by hand (the e2e tests use the DWARF reader)."""

from __future__ import annotations

from perfab.size.causes import InlineView, explain
from perfab.size.families import FamilyMember
from perfab.size.inline import InlineIndex, InlineSite


def site(callee: str, caller: str, parent: str | None = None, line: int = 10, incl: int = 20) -> InlineSite:
    return InlineSite(callee, caller, parent, "x.c", line, incl, incl)


def view(*sites: InlineSite) -> InlineView:
    return InlineView.of(InlineIndex(tuple(sites), covered_bytes=100, function_bytes=1000))


def gone(name: str, size: int) -> list[FamilyMember]:
    return [FamilyMember(name, size, None)]


def test_removed_without_debug_info_is_just_removed():
    assert explain("copy_mm", gone("copy_mm", 2242), None, None).text == "removed"


def test_once_called_function_inlined_into_its_only_caller():
    new = view(site("copy_mm", "copy_process"))
    cause = explain("copy_mm", gone("copy_mm", 2242), view(), new)
    assert (cause.kind, cause.text) == ("inlined", "inlined into its only caller copy_process")


def test_copies_of_one_call_through_an_inlined_caller_still_count_as_one_caller():
    new = view(site("once", "run_once"), site("once", "main", parent="run_once"))
    assert explain("once", gone("once", 45), view(), new).text == "inlined into its only caller run_once (2 copies)"


def test_small_locking_function_inlined_at_many_sites():
    sites = [site("release_devnum", f"f{i}", line=i) for i in range(150)]
    cause = explain("release_devnum", gone("release_devnum", 28), view(), view(*sites))
    assert (cause.kind, cause.text) == ("inlined", "inlined at 150 sites in 150 functions")


def test_uninlined_names_the_old_sites():
    old = view(site("mix", "use_mix", line=1), site("mix", "use_mix", line=2))
    cause = explain("mix", [FamilyMember("mix", None, 37)], old, view())
    assert (cause.kind, cause.text) == ("uninlined", "uninlined: was inlined at 2 sites in use_mix")


def test_clone_replacing_the_function_is_one_change():
    members = [FamilyMember("samsung_gamepad_input_mapping", 2046, None),
               FamilyMember("samsung_gamepad_input_mapping.isra", None, 1900)]
    cause = explain("samsung_gamepad_input_mapping", members, None, None)
    assert cause.kind == "clone"
    assert cause.text == "clone .isra appeared, plain samsung_gamepad_input_mapping vanished"


def test_pfx_members_do_not_count_as_clones():
    members = [FamilyMember("__pfx_foo", None, 16), FamilyMember("foo", 100, 120)]
    assert explain("foo", members, None, None).kind == "body"


def test_body_change_names_what_is_now_inlined():
    old = view(site("dup_mmap", "copy_process"))
    new = view(site("dup_mmap", "copy_process"), site("copy_mm", "copy_process.isra.0", incl=2100))
    cause = explain("copy_process", [FamilyMember("copy_process", 6465, 10191)], old, new)
    assert (cause.kind, cause.text) == ("body", "body changed; now inlines copy_mm (1 site)")


def test_body_change_names_what_is_no_longer_inlined_and_site_counts():
    old = view(site("helper", "foo"), site("foo", "bar"), site("foo", "baz"))
    new = view(site("foo", "bar"))
    cause = explain("foo", [FamilyMember("foo", 100, 140)], old, new)
    assert cause.text == "body changed; no longer inlines helper; inlined at 1 fewer site"
