"""The kernel image QEMU boots, what it is, and the guest symbols remembered per kernel.

``describe`` reads what an image file is before anything boots it: a
bzImage (the x86 boot protocol's setup header, "HdrS" at 0x202, with the
kernel's version string and the longest command line it takes) or an ELF
vmlinux QEMU can enter directly (a PVH note); anything else is refused by
name.
``direct_image`` turns a bzImage into the vmlinux inside it when the kernel
can be entered directly (CONFIG_PVH): under TCG the bzImage's own
decompressor runs emulated and costs seconds at every boot.  The guest's
text and data symbols (``/proc/kallsyms``, fixed addresses under
``nokaslr``) are kept per kernel so a guest sends them once.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from perfab.kernel.initramfs import write_atomic

SETUP_MAGIC = b"HdrS"  # the boot protocol's setup header, at 0x202 of a bzImage
DEFAULT_CMDLINE_MAX = 2047  # COMMAND_LINE_SIZE - 1 on x86: what a PVH vmlinux (and a pre-2.06 header) takes


@dataclass(frozen=True)
class ImageInfo:
    """What a kernel image file is, read from its headers."""

    kind: str  # "bzImage" or "vmlinux" (an ELF with a PVH note)
    release: str | None  # the kernel's release ("6.1.0-56-amd64"), from the header's version string or the banner
    version: str | None  # the whole version string, e.g. "6.1.0-56-amd64 (debian-kernel@...) #1 SMP ..."
    cmdline_max: int  # the longest command line the kernel takes, in bytes without the final NUL
    boot_bytes: int | None = None  # guest memory below the kernel's end while it starts (load address + its size)


def describe(path: str | Path) -> ImageInfo:
    """What ``path`` is; ``ValueError`` saying what it is instead when it is neither a bzImage nor a PVH vmlinux."""
    with open(path, "rb") as f:
        head = f.read(0x300)
        if head[:4] == b"\x7fELF":
            return _elf_info(f)
        if len(head) < 0x240 or head[0x202:0x206] != SETUP_MAGIC or head[0x1FE:0x200] != b"\x55\xaa":
            raise ValueError(f"is not a bzImage (no {SETUP_MAGIC.decode()} boot header at 0x202) nor an ELF vmlinux"
                             f"{_looks_like(head)}")
        protocol, = struct.unpack_from("<H", head, 0x206)
        pointer, = struct.unpack_from("<H", head, 0x20E)
        cmdline_max = struct.unpack_from("<I", head, 0x238)[0] if protocol >= 0x206 else 255
        boot_bytes = sum(struct.unpack_from("<QI", head, 0x258)) if protocol >= 0x20A else None  # pref + init_size
        version = None
        if pointer:
            f.seek(pointer + 0x200)
            version = f.read(256).split(b"\0", 1)[0].decode("ascii", "replace").strip() or None
    return ImageInfo("bzImage", version.split()[0] if version else None, version, cmdline_max, boot_bytes)


def _elf_info(f) -> ImageInfo:
    """An ELF vmlinux: it boots only with a PVH note; its release is in the ``Linux version`` banner."""
    f.seek(0)
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if len(data) < 64 or not _has_pvh_note(data):
            raise ValueError("is an ELF file without a PVH note (XEN_ELFNOTE_PHYS32_ENTRY), which QEMU cannot enter "
                             "directly (a vmlinux needs CONFIG_PVH=y)")
        at = data.find(b"Linux version ")
        banner = data[at + 14: at + 270].split(b"\0", 1)[0].split(b"\n", 1)[0] if at >= 0 else b""
        end = _load_end(data)
    version = banner.decode("ascii", "replace").strip() or None
    return ImageInfo("vmlinux", version.split()[0] if version else None, version, DEFAULT_CMDLINE_MAX, end)


def _load_end(elf) -> int | None:
    """The highest physical address an ELF's loaded segments reach (where the kernel ends in guest memory)."""
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    ends = []
    for i in range(phnum):
        if phentsize < 56 or phoff + (i + 1) * phentsize > len(elf):
            return None
        ptype, _flags, _off, _va, paddr, _filesz, memsz = struct.unpack_from("<IIQQQQQ", elf, phoff + i * phentsize)
        if ptype == 1:  # PT_LOAD
            ends.append(paddr + memsz)
    return max(ends) if ends else None


def kernel_elf(head: bytes) -> bool:
    """An x86-64 ELF whose program headers (within ``head``) load code at kernel addresses: a vmlinux."""
    if len(head) < 64 or head[4] != 2 or head[5] != 1:
        return False
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    for i in range(phnum):
        at = phoff + i * phentsize
        if phentsize < 56 or at + 56 > len(head):
            return False
        ptype, _flags, _off, vaddr = struct.unpack_from("<IIQQ", head, at)
        if ptype == 1 and vaddr >= 0xFFFF800000000000:  # PT_LOAD in the kernel's half
            return True
    return False


def _looks_like(head: bytes) -> str:
    """A few words on what a refused image looks like, for the message."""
    if not head:
        return " (it is empty)"
    if head[:2] == b"#!":
        return " (it is a script)"
    if all(32 <= c < 127 or c in (9, 10, 13) for c in head[:256]):
        return " (it is text)"
    return ""


def direct_image(kernel: str, cache: Path) -> str:
    """An ELF vmlinux QEMU can enter directly (PVH), extracted once from a bzImage; else ``kernel``.

    Under TCG the bzImage's own decompressor runs emulated and costs seconds
    at every boot; a kernel built with CONFIG_PVH carries an ELF note QEMU
    uses to start the uncompressed vmlinux at once.  xz and gzip payloads are
    extracted (cached by the bzImage's hash); anything else boots as given."""
    data = Path(kernel).read_bytes()
    if data[:4] == b"\x7fELF":
        return kernel
    target = cache / f"vmlinux-{hashlib.sha256(data).hexdigest()[:20]}"
    if target.exists():
        return str(target) if target.stat().st_size else kernel
    elf = _decompress_payload(data)
    blob = elf if elf is not None and _has_pvh_note(elf) else b""
    write_atomic(target, blob)  # empty: remembered as not directly bootable
    return str(target) if blob else kernel


def vmlinux_of(data: bytes) -> bytes | None:
    """The ELF vmlinux inside a bzImage (xz or gzip payload), ``data`` itself when it is an ELF; else None."""
    return data if data[:4] == b"\x7fELF" else _decompress_payload(data)


def _decompress_payload(data: bytes) -> bytes | None:
    for magic, open_ in ((b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(b)),
                         (b"\x1f\x8b\x08", lambda b: gzip.GzipFile(fileobj=io.BytesIO(b)).read())):
        at = data.find(magic)
        if at < 0:
            continue
        try:
            out = open_(data[at:])
        except (lzma.LZMAError, OSError, EOFError):
            continue
        if out[:4] == b"\x7fELF":
            return out
    return None


def _has_pvh_note(elf: bytes) -> bool:
    """True when the ELF has a Xen note of type 18 (XEN_ELFNOTE_PHYS32_ENTRY), QEMU's PVH entry."""
    if elf[4] != 2 or elf[5] != 1:  # 64-bit little-endian only
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        if phoff + (i + 1) * phentsize > len(elf) or phentsize < 40:
            return False  # a truncated or damaged header: no note can be read
        ptype, _flags, off, _va, _pa, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if ptype != 4:  # PT_NOTE
            continue
        pos, end = off, min(off + filesz, len(elf))
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12: pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == 18:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def kallsyms_path(kernel: str, cache: Path) -> Path:
    return cache / f"kallsyms-percpu-{hashlib.sha256(Path(kernel).read_bytes()).hexdigest()[:20]}.txt"


def cached_kallsyms(kernel: str, cache: Path) -> bytes | None:
    """The text, data and per-CPU (absolute, "A") symbols a guest of this kernel sent before (addresses are fixed:
    nokaslr)."""
    try:
        return kallsyms_path(kernel, cache).read_bytes()
    except OSError:
        return None


def remember_kallsyms(kernel: str, cache: Path, text: bytes) -> None:
    """Keep the symbols a guest of ``kernel`` sent."""
    write_atomic(kallsyms_path(kernel, cache), text)


def release(kernel: str) -> str | None:
    """The kernel's release (``uname -r``): from a bzImage's setup header (``kernel_version``), or the
    ``Linux version`` banner of an ELF vmlinux; None when the file names none."""
    try:
        with open(kernel, "rb") as f:
            head = f.read(0x10000)
            if head[:4] == b"\x7fELF":
                head += f.read()
    except OSError:
        return None
    if head[0x202:0x206] == b"HdrS" and len(head) > 0x210:
        offset, = struct.unpack_from("<H", head, 0x20E)
        text = head[0x200 + offset: 0x200 + offset + 256].split(b"\0", 1)[0]
        words = text.split()
        return words[0].decode(errors="replace") if offset and words else None
    at = head.find(b"Linux version ")
    if at < 0:
        return None
    words = head[at + len(b"Linux version "): at + 200].split()
    return words[0].decode(errors="replace") if words else None
