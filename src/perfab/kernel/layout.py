"""A kernel built with every function at a 64-byte boundary: the aligned pair of a layout check.

A change in one part of the kernel moves where the functions after it
start, and with them which functions share an L1i line or a decoded-icache
window; the kernel test robot's engineers added
``DEBUG_FORCE_FUNCTION_ALIGN_64B`` to 6.1's ``lib/Kconfig.debug`` because
such moves "cause magic performance bump" in unrelated code.  With it the
top Makefile adds ``-falign-functions=64``, so every function starts a
cache line in both kernels of a pair and a change of function addresses
by less than a line no longer shifts everything behind it.

What else aligns text in 6.1 on x86-64, and why nothing more is set: the
arch Makefile packs jump targets and loops (``-falign-jumps=1
-falign-loops=1``) on every build, so they cannot be set apart per side;
``CC_OPTIMIZE_FOR_SIZE`` would drop gcc's own alignment but changes the
code, not its placement.  The option's only dependencies are ``EXPERT``
and a 64-bit or ARM/PowerPC/ARC architecture (``depends on EXPERT &&
(X86_64 || ARM64 || PPC32 || PPC64 || ARC)``), so ``EXPERT=y`` comes with
it; ``EXPERT`` selects ``DEBUG_KERNEL``, which changes no code by itself.
"""

from __future__ import annotations

from dataclasses import replace

from perfab.specfile import Kernel

ALIGN_OPTIONS = (("DEBUG_FORCE_FUNCTION_ALIGN_64B", "y"), ("EXPERT", "y"))  # set over the side's own options


def aligned_kernel(kernel: Kernel) -> Kernel:
    """The side's kernel with every function aligned to 64 bytes (its options win nowhere over these)."""
    options = dict(kernel.config)
    options.update(ALIGN_OPTIONS)
    return replace(kernel, config=tuple(options.items()))
