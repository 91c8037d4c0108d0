"""perfab.size: a symbol-level code-size diff of two ELF files that explains itself.

The path of a diff, one module per step:

1. ``elf``       maps the file; header, sections and ``.symtab`` as numpy arrays,
                 every field checked against the file;
   ``target``    refuses or flags two files built for different targets.
2. ``symbols``   perfab's symbol rules (aliases once, statics keyed by file);
   ``compat``    bloat-o-meter's rules and output, exactly.
3. ``families``  folds ``foo.cold``, ``foo.isra.N``, ``__pfx_foo``... into ``foo``.
4. ``causes``    one cause per family, from symbols and DWARF inline sites
                 (``inline``: the DWARF reader).
5. ``diff``      ``diff_files`` -> ``SizeDiff``; ``report`` prints it
                 (``perfab size OLD NEW`` is ``perfab.commands.size``).

As a library::

    from perfab.size import diff_files
    d = diff_files("vmlinux.old", "vmlinux.new")
    for fam in d.families[:10]:
        print(fam.name, fam.delta_bytes, fam.cause.text)
"""

from __future__ import annotations

__all__ = ["Coverage", "FamilyRow", "SectionRow", "SizeDiff", "diff_files"]


def __getattr__(name: str):
    """The names of ``perfab.size.diff``, imported when first asked for (PEP 562): ``perfab size --help``
    imports the package without numpy."""
    if name in __all__:
        from perfab.size import diff

        return getattr(diff, name)
    raise AttributeError(f"module 'perfab.size' has no attribute {name!r}")
