"""What each file was built for, and whether two files can be diffed symbol by symbol.

A size diff pairs functions by name and subtracts their sizes; that means
something only when both files hold code for the same target.  Three ELF
header fields name the target (System V ABI, ``e_ident[EI_CLASS]``,
``e_ident[EI_DATA]``, ``e_machine``), and a mismatch in each is handled so:

- **class** (ELF32 vs ELF64) and **byte order**: refused (``UsageError``,
  exit 2) unless ``allow_mismatch``.  Two builds of one tree for one target
  never differ in these: the pointer width or byte order is fixed by the
  target triple, so a mismatch almost always means a wrong file was given
  (an ``-m32`` build, a ``_be`` toolchain).  A deliberate comparison across
  ABIs (i386 vs x86-64) passes ``--allow-mismatch`` and gets the warning.
- **machine** (x86-64 vs AArch64): a warning, never a refusal.  Comparing
  one source's code density on two architectures is a question people ask
  on purpose, and the totals, sections and families still answer it; but
  every function row compares unrelated instructions, so the warning is
  printed on stderr and at the top of the report.

In ``--compat`` mode the warning goes to stderr only: the report is
bloat-o-meter's output byte for byte, which scripts parse.
"""

from __future__ import annotations

from perfab.errors import UsageError
TYPE_CHECKING = False  # annotations only: importing the reader would load numpy
if TYPE_CHECKING:
    from perfab.size.elf import ElfFile

# e_machine values (System V ABI, "ELF Header"; Linux's include/uapi/linux/elf-em.h)
MACHINES = {
    2: "SPARC", 3: "i386", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "s390", 40: "ARM",
    42: "SuperH", 43: "SPARC V9", 50: "IA-64", 62: "x86-64", 183: "AArch64", 243: "RISC-V", 258: "LoongArch",
}


def describe(f: ElfFile) -> str:
    """``ELF64 little-endian x86-64 (e_machine 62)``."""
    machine = MACHINES.get(f.machine, "unknown machine")
    order = "big-endian" if f.big_endian else "little-endian"
    return f"ELF{f.elf_class} {order} {machine} (e_machine {f.machine})"


def check_targets(old: ElfFile, new: ElfFile, allow_mismatch: bool = False) -> str | None:
    """One line saying how the targets of ``old`` and ``new`` differ; None if they agree.

    Raises ``UsageError`` for a class or byte-order mismatch unless
    ``allow_mismatch`` (see the module docstring for why).
    """
    differ = [
        what
        for what, a, b in (
            ("machine", old.machine, new.machine),
            ("class", old.elf_class, new.elf_class),
            ("byte order", old.big_endian, new.big_endian),
        )
        if a != b
    ]
    if not differ:
        return None
    text = f"{old.path} is {describe(old)} and {new.path} is {describe(new)}: different {' and '.join(differ)}"
    if differ != ["machine"] and not allow_mismatch:
        raise UsageError(
            f"{text}: a function-by-function size diff across targets is meaningless; "
            "give two builds for the same target, or pass --allow-mismatch to diff them anyway"
        )
    return f"{text}: each function row compares code built for different targets; only the totals are comparable"
