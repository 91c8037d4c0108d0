"""``perfab size --compat``'s text from the compiled symbol reader, without numpy.

bloat-o-meter's whole output is a function of bytes per name on each side.
``perfab_native.nm_diff`` reads them straight from ``.symtab`` with the
rules of ``compat`` (the same symbols, nm letters, skipped names and
``.NUMBER`` stripping), both files at once, and counts what changed;
``bloat.table_from_counts`` orders the rows and ``bloat.format_compat``
prints them, so the text is the same byte for byte.  The numpy reader stays the
reference and the fallback: ``compat_text`` returns None whenever it should
answer instead (no compiled reader, a file that is not a readable regular
ELF file with a ``.symtab``), and that reader then names the cause.
"""

from __future__ import annotations

import os
import stat
from types import SimpleNamespace

from perfab.size.bloat import FORMATS, TITLES, format_compat, table_from_counts
from perfab.size.target import check_targets

MODES = {"all": ("all",), "text": ("text",), "data+rodata": ("data+rodata",), "categories": ("text", "data", "rodata")}


def compat_text(old: str, new: str, mode: str = "all", allow_mismatch: bool = False) -> tuple[str, str | None] | None:
    """(bloat-o-meter's text, how the targets differ or None); None: use ``diff.diff_files``.

    Raises ``UsageError`` for files of another class or byte order unless
    ``allow_mismatch`` (``target.check_targets``).
    """
    reader = _reader()
    if reader is None or mode not in MODES or not all(_regular(p) for p in (old, new)):
        return None
    try:
        target_old, target_new, counts = reader(str(old), str(new), [FORMATS[m] for m in MODES[mode]])
    except ValueError:
        return None
    if not (target_old[3] and target_new[3]):
        return None  # stripped: the full path warns about it
    mismatch = check_targets(_target(old, target_old), _target(new, target_new), allow_mismatch)
    return format_compat([table_from_counts(TITLES[m], c) for m, c in zip(MODES[mode], counts)]), mismatch


def _reader():
    """``perfab_native.nm_diff``, or None when the compiled reader is missing or predates it."""
    try:
        import perfab_native
    except ImportError:
        return None
    return getattr(perfab_native, "nm_diff", None)


def _regular(path: str) -> bool:
    """Whether ``path`` is a regular file (a FIFO would block the reader's open)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _target(path: str, header: tuple) -> SimpleNamespace:
    """What ``check_targets`` reads of a file: path, class, byte order, machine."""
    return SimpleNamespace(path=str(path), elf_class=header[0], big_endian=header[1], machine=header[2])
