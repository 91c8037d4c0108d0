"""Kernel sides checked before anything is stored, built or booted: the one pre-flight of ``plan`` and ``run``.

``check_sides`` refuses, in one line naming the key and the fix, what a
boot would otherwise find out run after run (or never):

- ``variant.kernel.image``: a regular file that is a bzImage (the boot
  protocol's ``HdrS`` header at 0x202) or an ELF vmlinux with a PVH note
  (``perfab.kernel.image.describe``); a directory, a device, a FIFO, text
  or a user-space program is refused;
- ``variant.kernel.symbols``: a System.map (``ADDR TYPE NAME`` lines that
  name code) or an ELF vmlinux; Debian's one-line placeholder is refused;
- ``variant.kernel.cmdline``: perfab's own options and the side's must fit
  the command line the kernel takes (2047 bytes on x86; a longer one boots
  to nothing and the run times out with an empty console);
- ``{placeholders}`` in ``image``, ``symbols`` and ``cmdline`` expand per
  side, with ``{variant}``, ``{experiment}`` and the side's ``vars`` (a
  kernel belongs to a side, not to a workload or a sweep point); any other
  is refused;
- ``measure.memory``: enough for the kernel where it starts (its boot
  header's load address and ``init_size``, or a vmlinux's segments), the
  initramfs and ``MEMORY_HEADROOM``; less crashes QEMU with a register dump;
- ``measure.files``: regular files, or directories holding only regular
  files, readable, ``FILES_LIMIT_BYTES`` in all and at most half the
  guest's memory (the initramfs carries them and the guest unpacks it into
  its RAM); kernel pseudo-files (``/proc``, ``/sys``, ``/dev``), FIFOs,
  devices and sockets are refused, as are missing paths;
- a workload that is a script whose interpreter the guest does not have
  (its initramfs holds busybox, the files perfab copies in and a script's
  own ``#!`` interpreter; ``#!/usr/bin/env python3`` needs python3 listed),
  unless ``measure.root = "host"`` shows the guest this machine's root.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import replace
from pathlib import Path

from perfab.errors import UsageError
from perfab.kernel import image as kimage
from perfab.plan import sweep_points
from perfab.specfile import Experiment, Kernel, Measure, Variant, expand, placeholders

FILES_LIMIT_BYTES = 256 << 20  # measure.files in all: the guest holds them in RAM (perfab builds the archive in RAM)
FILES_LIMIT_ENTRIES = 100_000  # files under measure.files' directories
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")  # kernel filesystems: their "files" are made as they are read
MEMORY_HEADROOM = 8 << 20  # guest memory a kernel needs beyond its image and the initramfs (96 MiB boots Debian's)
GUEST_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")  # the guest's PATH (initramfs)
_MAP_LINE = re.compile(rb"^[0-9a-fA-F]{8,16} [A-Za-z?-] \S+$")
_TEXT_SYMBOL = re.compile(rb"^[0-9a-fA-F]{8,16} [tT] \S+\r?$", re.M)


def check_sides(exp: Experiment, variants: tuple[Variant, ...], measure: Measure, full_cmdline) -> dict[str, Kernel]:
    """Each side's kernel with its placeholders expanded, after every check above; the first problem is a
    ``UsageError`` prefixed with the spec's path.  ``full_cmdline(side_cmdline)`` is the whole line a guest
    boots with (perfab's options and the side's)."""
    try:
        kernels = {v.name: side_kernel(exp, v) for v in variants}
        files = check_files(measure.files, measure.memory_mb)
        for v in variants:
            _check_kernel(v.name, kernels[v.name], full_cmdline, measure.memory_mb, files)
        _check_size(variants, measure)
        for v in variants:
            if measure.root == "initramfs":  # with the host's root the guest has what this machine has
                check_programs(exp, v, measure.files)
    except UsageError as e:
        raise type(e)(f"{exp.path}: {e}") from None
    return kernels


def _check_size(variants: tuple[Variant, ...], measure: Measure) -> None:
    """``measure.size`` diffs built vmlinux files: a prebuilt image has none beside it."""
    prebuilt = [v.name for v in variants if v.kernel is not None and v.kernel.image is not None]
    if measure.size and prebuilt:
        raise UsageError(f"measure.size diffs the vmlinux of kernels built from source, but side {prebuilt[0]!r} "
                         "boots a prebuilt image; build it from source (variant.kernel.base) or run perfab size on "
                         "the two vmlinux by hand")


def side_kernel(exp: Experiment, variant: Variant) -> Kernel:
    """``variant``'s kernel with ``{variant}``, ``{experiment}`` and its vars expanded in image, symbols, cmdline."""
    k = variant.kernel
    values = {"variant": variant.name, "experiment": exp.name, **variant.vars}
    where = f"side {variant.name!r}: variant.kernel"
    x = lambda text, key: None if text is None else _expand(text, values, f"{where}.{key}")  # noqa: E731
    return replace(k, image=x(k.image, "image"), symbols=x(k.symbols, "symbols"), cmdline=x(k.cmdline, "cmdline"))


def _expand(text: str, values: dict[str, str], where: str) -> str:
    try:
        return expand(text, values, where)
    except UsageError as e:
        raise UsageError(f"{e} (a kernel belongs to its side: {{workload}} and sweep parameters are not known "
                         "here)") from None


def _check_kernel(side: str, k: Kernel, full_cmdline, memory_mb: int, files_bytes: int) -> None:
    """A prebuilt image and any symbols file are what they claim; the command line and the memory fit the kernel."""
    where = f"side {side!r}: variant.kernel"
    cmdline_max = kimage.DEFAULT_CMDLINE_MAX
    if k.image is not None:
        info = check_image(k.image, f"{where}.image")
        cmdline_max = info.cmdline_max
        check_memory(info, memory_mb, files_bytes, side)
    if k.symbols is not None:
        check_symbols(k.symbols, f"{where}.symbols")
    check_cmdline_words(k.cmdline, f"{where}.cmdline")
    line = full_cmdline(k.cmdline)
    if len(line.encode()) > cmdline_max:
        raise UsageError(f"{where}.cmdline: the guest's command line would be {len(line.encode()):,} bytes "
                         f"(perfab's {len(line.encode()) - len(k.cmdline.encode()):,} and this side's), and the "
                         f"kernel takes at most {cmdline_max:,} (a longer one boots to nothing); shorten cmdline")


OWN_WORDS = ("init", "rdinit")  # parameters perfab's boot needs as it sets them: its init runs the workload


def check_cmdline_words(cmdline: str, where: str) -> None:
    """A side's command line leaves perfab's init in place and its own options to the kernel: ``init=`` or
    ``rdinit=`` would start another program than the one that runs the workload (the guest never reaches it), and
    ``--`` would hand every later option, the boot's perturbation among them, to init instead of the kernel."""
    words = cmdline.split()
    for word in words:
        name = word.split("=", 1)[0]
        if name in OWN_WORDS and "=" in word:
            raise UsageError(f"{where}: {word!r} replaces perfab's init, which runs the workload (the guest would "
                             f"never reach it); remove {name}=")
    if "--" in words:
        raise UsageError(f"{where}: '--' hands every option after it to init, not the kernel (perfab adds its own "
                         "after the side's); remove it and pass init's arguments in the workload instead")


def check_memory(info: kimage.ImageInfo, memory_mb: int, files_bytes: int, side: str) -> None:
    """The guest's memory holds the kernel where it starts (load address + size, from its headers), the initramfs
    after it and ``MEMORY_HEADROOM`` to run; less fails in QEMU itself (a TCG crash, not a kernel message)."""
    if info.boot_bytes is None:
        return
    needed = info.boot_bytes + files_bytes + MEMORY_HEADROOM
    if memory_mb << 20 < needed:
        suggest = -(-needed // (32 << 20)) * 32
        raise UsageError(f"measure.memory = {memory_mb} MiB is too little for the kernel of side {side!r}: it fills "
                         f"guest memory up to {info.boot_bytes / (1 << 20):.0f} MiB while it starts (its load address "
                         f"and size) and the initramfs comes after it; set memory = {suggest} or more")


def _regular(path: str, where: str, what: str, fix: str) -> os.stat_result:
    """``path``'s stat when it is a readable regular file, else a UsageError saying what it is."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"{where} {path} does not exist; {fix}") from None
    except OSError as e:
        raise UsageError(f"{where} {path} cannot be read ({e.strerror}); {fix}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{where} {path} is {file_kind(st.st_mode)}, not {what}; {fix}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{where} {path} is not readable; make it readable (chmod) or {fix}")
    return st


def check_image(path: str, where: str) -> kimage.ImageInfo:
    """A bzImage or a PVH vmlinux, regular and readable."""
    fix = "give a bzImage (e.g. /boot/vmlinuz-$(uname -r) or arch/x86/boot/bzImage) or fix the path"
    _regular(path, where, "a kernel image", fix)
    try:
        return kimage.describe(path)
    except OSError as e:
        raise UsageError(f"{where} {path} cannot be read ({e.strerror}); {fix}") from None
    except ValueError as e:
        raise UsageError(f"{where} {path} {e}; {fix}") from None


def check_symbols(path: str, where: str) -> None:
    """A System.map (``ADDR TYPE NAME``, with code) or an ELF vmlinux."""
    fix = ("give the kernel's System.map or vmlinux, or remove symbols (the guest's /proc/kallsyms then names "
           "the code)")
    _regular(path, where, "a System.map or vmlinux", fix)
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if head[:4] == b"\x7fELF":
        if not kimage.kernel_elf(head):
            raise UsageError(f"{where} {path} is an ELF file that is not a kernel (no code loaded in the kernel's "
                             f"half of the address space); {fix}")
        return
    lines = [ln for ln in head.split(b"\n")[:-1 if len(head) == 1 << 16 else None] if ln.strip()]
    if b"The real System.map is in" in head:
        raise UsageError(f"{where} {path} is Debian's placeholder, not a symbol map; install the kernel's -dbg "
                         f"package for the real one, or {fix.split(', or ')[1]}")
    if not lines or not all(_MAP_LINE.match(ln.rstrip(b"\r")) for ln in lines) or not _TEXT_SYMBOL.search(head):
        raise UsageError(f"{where} {path} is not a System.map (lines \"ADDR TYPE NAME\" naming code) nor an ELF "
                         f"vmlinux; {fix}")


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def check_files(files: tuple[str, ...], memory_mb: int) -> int:
    """The bytes ``measure.files`` put into each guest, after the checks in the module docstring."""
    total, entries = 0, 0
    for given in files:
        where = f"measure.files: {given!r}"
        path = os.path.abspath(given)  # as the initramfs reads it: relative to perfab's working directory
        _not_pseudo(path, where)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise UsageError(f"{where} does not exist on this machine; fix the path or remove it") from None
        except OSError as e:
            raise UsageError(f"{where} cannot be read ({e.strerror}); fix its permissions or remove it") from None
        for name, size in (_tree(path, where) if stat.S_ISDIR(st.st_mode) else [(path, _one(path, st, where))]):
            total, entries = total + size, entries + 1
            if total > FILES_LIMIT_BYTES or entries > FILES_LIMIT_ENTRIES:
                raise UsageError(f"measure.files: more than {FILES_LIMIT_BYTES >> 20} MiB or "
                                 f"{FILES_LIMIT_ENTRIES:,} files (at {name}); every guest carries them in its "
                                 "initramfs: list only the files the workload reads")
    if total > (memory_mb << 20) // 2:
        raise UsageError(f"measure.files: {total / (1 << 20):.1f} MiB, more than half of the guest's "
                         f"{memory_mb} MiB (the guest unpacks them into its RAM); raise measure.memory or list "
                         "fewer files")
    return total


def _not_pseudo(path: str, where: str) -> None:
    real = os.path.realpath(path)
    root = next((r for r in PSEUDO_ROOTS if real == r or real.startswith(r + "/")), None)
    if root is not None:
        raise UsageError(f"{where} is under {root}{f' (it leads to {real})' if real != path else ''}, a kernel "
                         "file system whose files are made as they are read (a guest has its own); copy what the "
                         "workload needs into a regular file and list that")


def _one(path: str, st: os.stat_result, where: str, shown: str | None = None) -> int:
    """The size of one regular, readable file."""
    if not stat.S_ISREG(st.st_mode):
        inside = f" holds {shown}, which" if shown else ""
        raise UsageError(f"{where}{inside} is {file_kind(st.st_mode)}; list regular files (or directories of them) "
                         "only")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise UsageError(f"{where}{f' holds {shown}, which' if shown else ''} cannot be read ({e.strerror}); fix "
                         "its permissions or remove it") from None
    return st.st_size


def _tree(top: str, where: str):
    """(path, size) of every file under directory ``top``; anything but a regular file is refused."""
    for root, dirs, names in os.walk(top, onerror=_walk_error(where)):
        dirs.sort()
        for name in sorted(names):  # a link to a directory is not followed, as the initramfs does not
            path = os.path.join(root, name)
            _not_pseudo(path, f"{where} holds {path}, which")
            try:
                st = os.stat(path)
            except OSError as e:
                raise UsageError(f"{where} holds {path}, which cannot be read ({e.strerror}); fix or remove it") \
                    from None
            yield path, _one(path, st, where, path)


def _walk_error(where: str):
    def fail(e: OSError) -> None:
        raise UsageError(f"{where}: cannot list {e.filename} ({e.strerror}); fix its permissions or remove it")
    return fail


def check_programs(exp: Experiment, variant: Variant, files: tuple[str, ...]) -> None:
    """Every workload program of ``variant`` that is a script names an interpreter the guest has."""
    for workload in exp.workloads:
        if workload.shell or not workload.argv:
            continue
        for point in sweep_points(workload):
            try:
                values = placeholders(exp, variant, workload, point)
                program = expand(workload.argv[0], values)
                cwd = expand(workload.cwd, values) if workload.cwd else os.getcwd()
            except UsageError:
                continue  # the run's own pre-flight names it
            problem = guest_cannot_run(_host_program(program, cwd, variant), files)
            if problem:
                raise UsageError(f"workload {workload.name!r}, side {variant.name!r}: argv[0] {program} {problem}")


def _host_program(program: str, cwd: str, variant: Variant) -> str | None:
    """Where the guest's copy of ``program`` comes from (as the initramfs finds it), None when not a host file."""
    import shutil

    if "/" in program:
        path = program if program.startswith("/") else os.path.join(cwd, program)
        return path if os.path.isfile(path) else None
    return shutil.which(program, path=variant.env.get("PATH", ":".join(GUEST_PATH)))


def guest_cannot_run(path: str | None, files: tuple[str, ...]) -> str | None:
    """Why the guest cannot start ``path`` (a script for an interpreter it lacks), or None."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return "is a script with an empty #! line; name its interpreter, e.g. #!/bin/sh"
    wanted = [words[0]] + ([words[1]] if Path(words[0]).name == "env" and len(words) > 1 else [])
    copied = {words[0]} if os.path.isfile(words[0]) else set()  # the initramfs carries a script's interpreter
    missing = [w for w in wanted if w not in copied and not _in_guest(w, files)]
    if not missing:
        return None
    return (f"is a script for {' '.join(wanted)}, and the guest has no {missing[0]} (its initramfs holds busybox "
            f"sh, the script's interpreter and the files perfab copies in); add \"{_host_path(missing[0])}\" to "
            'measure.files, or set measure.root = "host"')


def _in_guest(program: str, files: tuple[str, ...]) -> bool:
    from perfab.kernel.initramfs import APPLETS, BUSYBOX

    own = {str(BUSYBOX), *(f"/bin/{a}" for a in APPLETS)}
    candidates = [program] if "/" in program else [f"{d}/{program}" for d in GUEST_PATH]
    listed = [os.path.normpath(f if f.startswith("/") else "/" + f) for f in files]
    return any(c in own or any(c == f or c.startswith(f.rstrip("/") + "/") for f in listed) for c in candidates)


def _host_path(program: str) -> str:
    import shutil

    return program if "/" in program else (shutil.which(program) or f"/usr/bin/{program}")
