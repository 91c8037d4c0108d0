"""Print the vmlinux of kernel sides of a spec, for `perfab size OLD NEW`.

    python examples/kernel-vmlinux.py SPEC SIDE [SIDE ...]

Each side's kernel comes from perfab's kernel cache (``.perfab/kernel``):
after `perfab run SPEC` it is there and nothing is built; a side not built
yet is built first (minutes), as `perfab run` would.  The paths go to
stdout, one per side, in the order asked; progress goes to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfab.errors import PerfabError
from perfab.specfile import load_spec

CACHE = Path(".perfab") / "kernel"  # the guest backend's kernel cache


def vmlinux(spec_path: str, side: str) -> Path:
    """The built vmlinux of ``side`` in ``spec_path`` (from the cache when built before)."""
    variant = load_spec(spec_path).variant(side)
    if variant.kernel is None or variant.kernel.image is not None:
        raise PerfabError(f"side {side!r} of {spec_path} builds no kernel from source: no vmlinux to name")
    from perfab.kernel.build import build_kernel
    from perfab.kernel.sides import kernel_request

    art = build_kernel(kernel_request(variant), CACHE, lambda line: print(line, file=sys.stderr))
    return Path(art.vmlinux)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        paths = [vmlinux(argv[0], side) for side in argv[1:]]
    except PerfabError as e:
        print(f"kernel-vmlinux: {e}", file=sys.stderr)
        return 2
    print("\n".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
