"""The kernel image QEMU boots, and the guest symbols remembered per kernel.

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
import struct
from pathlib import Path

from perfab.kernel.initramfs import write_atomic


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
        ptype, _flags, off, _va, _pa, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if ptype != 4:  # PT_NOTE
            continue
        pos, end = off, off + filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12: pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == 18:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def kallsyms_path(kernel: str, cache: Path) -> Path:
    return cache / f"kallsyms-data-{hashlib.sha256(Path(kernel).read_bytes()).hexdigest()[:20]}.txt"


def cached_kallsyms(kernel: str, cache: Path) -> bytes | None:
    """The text and data symbols a guest of this kernel sent before (addresses are fixed: nokaslr)."""
    try:
        return kallsyms_path(kernel, cache).read_bytes()
    except OSError:
        return None


def remember_kallsyms(kernel: str, cache: Path, text: bytes) -> None:
    """Keep the symbols a guest of ``kernel`` sent."""
    write_atomic(kallsyms_path(kernel, cache), text)
