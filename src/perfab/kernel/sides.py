"""A side's kernel made ready to boot, and the request of one run in its guest.

``resolve_kernel`` turns a ``[variant.kernel]`` table into an image to boot
and the symbols to name its code by: a prebuilt image as given (its
System.map found beside it in /boot), or one built from source by
``perfab.kernel.build`` (cached, so a warm session builds nothing).
``choose_accel`` settles KVM or TCG once per session, and says which.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from perfab.errors import UsageError
from perfab.specfile import Measure, Variant

TOP_SYMBOLS = 200  # kernel symbols named per run, by instructions and by L1i misses


@dataclass(frozen=True)
class KernelImage:
    """A kernel ready to boot."""

    image: Path  # bzImage / vmlinuz
    symbols: Path | None  # System.map or vmlinux naming its code; None: counts are not attributed to symbols
    label: str  # how reports name it, e.g. "vmlinuz-6.1.0-56-amd64" or "built 3f2a91c0d4e1"
    vmlinux: Path | None = None  # the ELF image with symbols, for `perfab size` (built kernels)
    cmdline: str = ""  # the side's own command line, placeholders expanded (perfab adds its options before it)
    config: Path | None = None  # the resolved .config it was built from; None: a prebuilt image

    def identity(self) -> dict:
        """What the session stores of the kernel a side booted: image path and SHA-256, release, command line, and
        the .config's SHA-256 for a built kernel (``perfab.run.session`` refuses a resume whose image changed)."""
        from perfab.kernel.image import describe

        try:
            release = describe(self.image).release
        except (OSError, ValueError):
            release = None
        return {"image": str(self.image), "sha256": _sha256(self.image), "release": release,
                "cmdline": self.cmdline, "label": self.label,
                "config_sha256": _sha256(self.config) if self.config is not None else None}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def resolve_kernel(variant: Variant, cache_root: Path, say) -> KernelImage:
    """The image ``variant`` boots: prebuilt, or built from its source (see the module docstring)."""
    k = variant.kernel
    if k is None:
        raise UsageError(f"side {variant.name!r} names no kernel; add a [variant.kernel] table")
    if k.image is None:
        return _built(variant, cache_root, say)
    image = Path(k.image)
    if not image.is_file():
        raise UsageError(f"side {variant.name!r}: kernel image {k.image} not found; install linux-image-amd64 "
                         "or fix variant.kernel.image")
    symbols = Path(k.symbols) if k.symbols else system_map(image)
    if symbols is not None and not symbols.is_file():
        raise UsageError(f"side {variant.name!r}: kernel symbols {symbols} not found; "
                         "fix variant.kernel.symbols (a System.map or vmlinux)")
    return KernelImage(image, symbols, image.name, cmdline=k.cmdline)


def system_map(image: Path) -> Path | None:
    """``/boot/System.map-VERSION`` beside ``/boot/vmlinuz-VERSION``, when it is there and names code.

    Debian ships a one-line stub there (the real map is in the -dbg package):
    a map without text symbols is no map, and the counts stay unattributed.
    """
    m = re.fullmatch(r"(?:vmlinuz|bzImage)-(.+)", image.name)
    candidate = image.with_name(f"System.map-{m.group(1)}") if m else image.with_name("System.map")
    if not candidate.is_file():
        return None
    with open(candidate, "rb") as f:
        head = f.read(4096)
    return candidate if re.search(rb"^[0-9a-f]+ [tT] ", head, re.M) else None


def _built(variant: Variant, cache_root: Path, say) -> KernelImage:
    """Build (or find in the cache) the side's kernel from its source, config and patches."""
    from perfab.kernel.build import build_kernel

    art = build_kernel(kernel_request(variant), cache_root, say)
    return KernelImage(Path(art.bzimage), Path(art.system_map), f"built {art.key[:12]}", Path(art.vmlinux),
                       variant.kernel.cmdline, Path(art.config))


def kernel_request(variant: Variant):
    """The ``perfab.kernel.build`` request of a side that builds its kernel."""
    from perfab.kernel.build import KernelRequest

    k = variant.kernel
    return KernelRequest(source=k.source, ref=k.ref, base=k.base, options=k.config, patches=k.patches)


def check_sides(variants, cache_root: Path, say) -> None:
    """Check every side that builds a kernel (source, options, patches) before any of them is built."""
    building = [v for v in variants if v.kernel is not None and v.kernel.image is None]
    if not building:
        return
    from perfab.kernel.build import check_kernel

    for v in building:
        plan = check_kernel(kernel_request(v), cache_root, say)
        say(f"kernel of {v.name}: {plan.key[:12]} ({'built before' if plan.cached else 'to build'})")


KVM_BOOT_S = 30.0  # a kernel boots to its init in about a second under KVM; this long means it never will


def choose_accel(asked: str, say, kernel: KernelImage | None = None, cache_root: Path = Path(".perfab/kernel"),
                 plugin: str | None = None) -> str:
    """``kvm`` or ``tcg``: as asked, or with ``auto`` KVM only where a side's kernel boots under it.

    The device can open and a tiny image run under KVM while a nested
    guest's kernel hangs after the BIOS, so ``auto`` boots ``kernel`` itself
    under KVM (``KVM_BOOT_S`` at most) before it trusts KVM; ``plugin`` names
    what needs perfab's TCG plugin (``measure.cache_sim``), which makes
    ``auto`` emulate.  No QEMU is a usage error.
    """
    if shutil.which("qemu-system-x86_64") is None:
        raise UsageError("no qemu-system-x86_64 on this machine; install qemu-system-x86 (make sysdeps)")
    if asked == "tcg":
        say("guest: TCG (as measure.accel asks)")
        return "tcg"
    if asked == "auto" and plugin:
        say(f"guest: TCG ({plugin} needs perfab's TCG plugin, which runs only under TCG)")
        return "tcg"
    problem = _kvm_problem(kernel, cache_root)
    if asked == "kvm" and problem:
        raise UsageError(f'measure.accel = "kvm" but {problem}; use accel = "auto" or "tcg"')
    say(f"guest: TCG ({problem}: emulating)" if problem else "guest: KVM (a probe boot of the kernel worked)")
    return "tcg" if problem else "kvm"


def _kvm_problem(kernel: KernelImage | None, cache_root: Path) -> str | None:
    """Why KVM cannot run the guests here, or None when a probe boot of ``kernel`` reached its workload."""
    from perfab.kernel import qemu

    if not qemu.probe_kvm():
        return "KVM is not usable here (no /dev/kvm, or a probe image did not run)"
    if kernel is None:
        return None
    result = qemu.boot(qemu.BootRequest(kernel=str(kernel.image), argv=("/bin/true",), accel="kvm", plugin=None,
                                        timeout_s=KVM_BOOT_S, deterministic=False,
                                        cache_dir=str(Path(cache_root, "guest").resolve())))
    if result.failure is None and result.status == 0:
        return None
    return f"{kernel.label} did not boot under KVM within {KVM_BOOT_S:g} s ({result.failure})"


def launch_request(kernel: KernelImage, variant: Variant, measure: Measure, accel: str, plugin: dict | None,
                   argv: list[str], result: Path, deadline_s: float,
                   cache_root: Path = Path(".perfab/kernel")) -> dict:
    """The JSON request ``perfab.kernel.launch`` reads for one run (its keys are listed there).

    Without a symbol map (Debian's /boot holds a stub), the guest's own
    ``/proc/kallsyms`` names the code, read once per kernel and cached.
    """
    return {
        "kernel": str(kernel.image), "symbols": str(kernel.symbols) if kernel.symbols else "guest",
        "cache_dir": str(Path(cache_root, "guest").resolve()),
        "cmdline": kernel.cmdline, "vcpus": measure.vcpus, "memory_mb": measure.memory_mb, "accel": accel,
        "plugin": plugin, "argv": list(argv), "env": dict(variant.env), "files": list(measure.files),
        "top": TOP_SYMBOLS, "result": str(result), "timeout_s": deadline_s,
    }


def plan_lines(variants, measure: Measure, cache_root: Path, boots: str = "one boot per run") -> list[str]:
    """What ``perfab plan`` shows of each kernel side: its build (checked, not run) and its boots (``boots``: how
    its runs start, in words)."""
    lines = [f"guest: {boots}, "
             f"{measure.vcpus} vCPU{'s' if measure.vcpus > 1 else ''}, {measure.memory_mb} MiB, accel {measure.accel}"]
    for v in variants:
        k = v.kernel
        if k.image is not None:
            what = f"boots {k.image}{_release(k.image)}"
        else:
            from perfab.kernel.build import check_kernel

            plan = check_kernel(kernel_request(v), cache_root, lambda line: None)
            options = " ".join(f"{n}={val}" for n, val in k.config)
            patches = f", {len(k.patches)} patch{'es' if len(k.patches) != 1 else ''}" if k.patches else ""
            what = (f"builds {k.source or 'linux-source-6.1'}{' @ ' + k.ref if k.ref else ''} ({k.base}"
                    f"{' ' + options if options else ''}{patches}): {plan.key[:12]}, "
                    f"{'cached, no build' if plan.cached else 'to build'}; boots it")
        lines.append(f"  kernel {v.name}: {what}, cmdline {k.cmdline!r}")
        lines.append(f"    network {v.name}: {network(k)}")
    return lines


def _release(image: str) -> str:
    from perfab.kernel.image import describe

    try:
        release = describe(image).release
    except (OSError, ValueError):
        return ""
    return f" (release {release})" if release else ""


def network(k) -> str:
    """What a guest of kernel ``k`` can reach: no network device ever; loopback only with NET and INET
    (perfab adds both to a tinyconfig; a side may turn them off)."""
    from perfab.kernel.config import GUEST_OPTIONS

    options = {**(GUEST_OPTIONS if k.base == "tinyconfig" else {}), **dict(k.config)}
    if k.image is None and not (options.get("NET") == "y" and options.get("INET") == "y"):
        return ('none: the guest has no network device, and this kernel no network stack (a workload that '
                'opens a socket fails); keep config NET = "y", INET = "y" for loopback')
    return "loopback only: the guest has no network device, so nothing outside it can be reached"
