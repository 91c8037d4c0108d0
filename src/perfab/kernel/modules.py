"""The kernel modules a guest loads before it can mount the host's root.

``root = "host"`` needs virtio-pci, 9p over virtio and overlayfs.  A kernel
perfab builds has them built in (``perfab.kernel.config.HOST_ROOT_OPTIONS``);
a distribution's kernel has them as modules of its release under
``/lib/modules/<release>/``, listed with their dependencies in
``modules.dep`` (``path: dependency dependency ...``).  ``for_host_root``
returns those files in an order ``insmod`` can load them, dependencies
first; a kernel whose release has no modules directory here gets none, and
the guest then says what it cannot mount.
"""

from __future__ import annotations

import os
from pathlib import Path

from perfab.kernel.image import release

HOST_ROOT_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay")
MODULES = Path("/lib/modules")


def for_host_root(kernel: str, base: Path = MODULES) -> tuple[str, ...]:
    """The module files ``kernel`` needs for the host root, dependencies first; () when built in or unknown."""
    name = release(kernel)
    if name is None:
        return ()
    deps = read_dep(base / name / "modules.dep")
    order: list[str] = []
    for module in HOST_ROOT_MODULES:
        _visit(module, deps, order, set())
    return tuple(str(base / name / path) for path in order)


def read_dep(path: Path) -> dict[str, tuple[str, list[str]]]:
    """``modules.dep`` as module name -> (its path, the names it depends on); {} when absent."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    out: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        module, sep, rest = line.partition(":")
        if sep:
            out[module_name(module)] = (module, [module_name(d) for d in rest.split()])
    return out


def module_name(path: str) -> str:
    """``kernel/fs/9p/9p.ko.xz`` -> ``9p``; dashes as underscores, as the kernel names modules."""
    base = os.path.basename(path)
    return base.split(".ko", 1)[0].replace("-", "_")


def _visit(name: str, deps: dict[str, tuple[str, list[str]]], order: list[str], seen: set[str]) -> None:
    if name in seen or name not in deps:
        return
    seen.add(name)
    path, needs = deps[name]
    for need in needs:
        _visit(need, deps, order, seen)
    if path not in order:
        order.append(path)
