"""Fold a function and the pieces the compiler made of it into one family.

GCC and Clang split and clone functions under suffixed names: ``foo.cold``
(hot/cold partitioning), ``foo.part.N`` (partial inlining), ``foo.isra.N``
(IPA scalar replacement of aggregates), ``foo.constprop.N`` (IPA constant
propagation), ``foo.lto_priv.N`` (LTO privatisation), ``foo.llvm.N`` (Clang
ThinLTO promotion), ``foo.localalias``; the kernel adds ``__pfx_foo`` (the
call-padding before ``foo``) and ``__cfi_foo`` (its kCFI preamble).  All of
them are ``foo``'s code: a family is ``foo`` plus these members, so an
``.isra`` clone replacing ``foo`` reads as one change, not an add and a remove.

Numbered locals (``__func__.3``, ``__key.12``) fold by their base name too.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cache

from perfab.size.symbols import Key

CLONE_TOKENS = frozenset({"cold", "part", "isra", "constprop", "lto_priv", "llvm", "localalias", "specialized"})
PREFIXES = ("__pfx_", "__cfi_")

FamilyId = tuple[str, "str | None"]  # (base name, source file; None unless statics of that name are in several files)


@dataclass(frozen=True)
class FamilyMember:
    """One member of a family: a symbol key and its sizes on each side."""

    name: str  # symbol name with .NUMBER stripped, e.g. "foo.isra", "__pfx_foo"
    old_bytes: int | None  # None: absent in the old file
    new_bytes: int | None  # None: absent in the new file

    @property
    def delta_bytes(self) -> int:
        """new - old, absent counting as 0."""
        return (self.new_bytes or 0) - (self.old_bytes or 0)


@cache  # called once per inline site: a vmlinux has ~600,000 of them over ~80,000 names
def family_base(name: str) -> str:
    """``foo`` for ``foo``, ``foo.isra``, ``foo.part.cold``, ``__pfx_foo``; else the name itself."""
    stem = name
    for prefix in PREFIXES:
        if stem.startswith(prefix) and len(stem) > len(prefix):
            stem = stem[len(prefix) :]
            break
    if "." not in stem:
        return stem
    head, *rest = stem.split(".")
    if head and all(tok in CLONE_TOKENS or tok.isdigit() for tok in rest):
        return head
    return name


def clone_label(member: str, base: str) -> str:
    """What a member is, relative to its base: "" for the base itself, ".isra", "__pfx_", ..."""
    if member == base:
        return ""
    for prefix in PREFIXES:
        if member == prefix + base:
            return prefix
    return member[len(base) :] if member.startswith(base) else member


def assign_families(keys: set[Key]) -> dict[Key, FamilyId]:
    """Map every key of both files to its family.

    Locals of one base in several source files (two ``static helper``) form
    one family per file, globals of that base a family of their own;
    otherwise globals and locals of a base share one family.
    """
    files_by_base: dict[str, set[str]] = defaultdict(set)
    base_of: dict[Key, str] = {}
    for key in keys:
        name, file = key
        base = family_base(name) if ("." in name or name.startswith("__")) else name
        base_of[key] = base
        if file is not None:
            files_by_base[base].add(file)
    out: dict[Key, FamilyId] = {}
    for key, base in base_of.items():
        files = files_by_base.get(base)
        out[key] = (base, key[1]) if files and len(files) > 1 else (base, None)
    return out
