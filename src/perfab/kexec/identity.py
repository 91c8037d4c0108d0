"""Which kernel is running, and which kernel an image is: the facts a kexec boot is confirmed by.

A running kernel names itself three ways: its release (``uname -r``), its
command line (``/proc/cmdline``) and the GNU build id among its ELF notes
(``/sys/kernel/notes``, the kernel's own ``.notes`` section).  An image
names the same things: the release in the bzImage header (the
``kernel_version`` string the boot protocol points at, offset 0x20E), the
build id in the notes of the vmlinux inside it.  Two sides that boot one
image with two command lines share a build id; the token perfab adds to
each boot's command line (``perfab.boot=...``) tells them apart, and tells
a boot perfab asked for from a fallback boot of the same kernel.

An image is signed when its PE/COFF header (a bzImage is also an EFI
application) has a certificate table: what a kernel under lockdown asks
of an image before ``kexec_file_load`` takes it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

TOKEN_KEY = "perfab.boot"  # the command-line parameter naming the boot perfab asked for
_GNU_BUILD_ID = 3  # NT_GNU_BUILD_ID


@dataclass(frozen=True)
class KernelIdentity:
    """A kernel as it names itself (running) or as its image names it."""

    release: str | None  # e.g. "6.1.0-56-amd64"; None when the image does not say
    cmdline: str  # the command line (running) or the one it will be given (image); "" when unknown
    build_id: str | None  # GNU build id, hex; None when the kernel or image carries none

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "KernelIdentity":
        return KernelIdentity(d.get("release"), d.get("cmdline") or "", d.get("build_id"))

    def describe(self) -> str:
        """One phrase: release, build id and command line."""
        bid = f", build id {self.build_id[:12]}" if self.build_id else ""
        return f"{self.release or 'unknown release'}{bid}, cmdline {self.cmdline.strip()!r}"


def running(proc: Path = Path("/proc"), sys: Path = Path("/sys")) -> KernelIdentity:
    """The kernel this machine runs now."""
    try:
        cmdline = (proc / "cmdline").read_text(errors="replace").strip()
    except OSError:
        cmdline = ""
    try:
        notes = (sys / "kernel" / "notes").read_bytes()
    except OSError:
        notes = b""
    return KernelIdentity(os.uname().release, cmdline, build_id_of_notes(notes))


def tokens(cmdline: str) -> list[str]:
    """The command line's words (quotes are not interpreted: perfab's own words carry none)."""
    return cmdline.split()


def boot_token(cmdline: str) -> str | None:
    """The value of ``perfab.boot=`` in a command line, or None."""
    found = [w.split("=", 1)[1] for w in tokens(cmdline) if w.startswith(TOKEN_KEY + "=")]
    return found[-1] if found else None


def build_id_of_notes(blob: bytes) -> str | None:
    """The GNU build id in a run of ELF notes (``Elf64_Nhdr`` + name + desc, each padded to 4 bytes)."""
    pos = 0
    while pos + 12 <= len(blob):
        namesz, descsz, ntype = struct.unpack_from("<III", blob, pos)
        name_at = pos + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        end = desc_at + (descsz + 3) // 4 * 4
        if end > len(blob):
            return None
        if ntype == _GNU_BUILD_ID and blob[name_at:name_at + namesz].rstrip(b"\0") == b"GNU":
            return blob[desc_at:desc_at + descsz].hex()
        pos = end
    return None


def build_id_of_elf(elf: bytes) -> str | None:
    """The GNU build id in the PT_NOTE segments of a 64-bit little-endian ELF (a vmlinux)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        ptype, _flags, off, _va, _pa, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if ptype == 4:  # PT_NOTE
            found = build_id_of_notes(elf[off:off + filesz])
            if found:
                return found
    return None


def release_of_image(data: bytes) -> str | None:
    """The release a bzImage's header names (boot protocol: ``HdrS`` at 0x202, version pointer at 0x20E)."""
    if len(data) < 0x210 or data[0x202:0x206] != b"HdrS":
        return None
    pointer, = struct.unpack_from("<H", data, 0x20E)
    at = 0x200 + pointer
    text = data[at:at + 256].split(b"\0", 1)[0].decode("ascii", errors="replace")
    return text.split()[0] if text.strip() else None


def signed(data: bytes) -> bool:
    """The image's PE/COFF header has a certificate table (an Authenticode signature) inside the file."""
    if len(data) < 0x40 or data[:2] != b"MZ":
        return False
    pe, = struct.unpack_from("<I", data, 0x3C)
    if data[pe:pe + 4] != b"PE\0\0":
        return False
    optional = pe + 24
    magic, = struct.unpack_from("<H", data, optional)
    directories = optional + {0x20B: 112, 0x10B: 96}.get(magic, 0)
    if directories == optional:
        return False
    count, = struct.unpack_from("<I", data, directories - 4)
    if count <= 4:
        return False
    offset, size = struct.unpack_from("<II", data, directories + 8 * 4)
    return size > 0 and offset + size <= len(data)


def config_of_vmlinux(elf: bytes) -> str | None:
    """The configuration a kernel built with CONFIG_IKCONFIG carries (gzip between IKCFG_ST and IKCFG_ED)."""
    start = elf.find(b"IKCFG_ST")
    if start < 0:
        return None
    end = elf.find(b"IKCFG_ED", start)
    try:
        return gzip.GzipFile(fileobj=io.BytesIO(elf[start + 8:end if end > 0 else None])).read().decode()
    except (OSError, EOFError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class ImageFacts:
    """What perfab reads from a kernel image before booting it (kept in the session's state)."""

    path: str  # the image file
    sha256: str  # its content, so a changed file is noticed
    release: str | None  # from the bzImage header
    build_id: str | None  # from the vmlinux inside
    signed: bool  # carries an Authenticode signature
    config: str | None  # path of its configuration (beside it in /boot, or extracted from IKCONFIG); None: none


def image_facts(image: Path, cache: Path) -> ImageFacts:
    """Read an image's release, build id, signature and configuration; the vmlinux is unpacked once per image
    (its facts are kept under ``cache``, keyed by the image's content)."""
    from perfab.kernel.image import vmlinux_of
    from perfab.kernel.initramfs import write_atomic

    data = image.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    kept = cache / f"facts-{digest[:24]}.txt"
    config_copy = cache / f"config-{digest[:24]}"
    if kept.is_file():
        build_id = kept.read_text().strip() or None
    else:
        elf = vmlinux_of(data)
        build_id = build_id_of_elf(elf) if elf else None
        embedded = config_of_vmlinux(elf) if elf else None
        if embedded:
            write_atomic(config_copy, embedded.encode())
        write_atomic(kept, (build_id or "").encode())
    release = release_of_image(data)
    config = _config_beside(image, release) or (str(config_copy) if config_copy.is_file() else None)
    return ImageFacts(str(image), digest, release, build_id, signed(data), config)


def _config_beside(image: Path, release: str | None) -> str | None:
    """``config-RELEASE`` beside ``vmlinuz-RELEASE`` (Debian's /boot), or ``config`` beside a built bzImage."""
    m = re.fullmatch(r"(?:vmlinuz|bzImage)-(.+)", image.name)
    for candidate in ([image.with_name(f"config-{m.group(1)}")] if m else []) + \
            ([image.with_name(f"config-{release}")] if release else []) + [image.with_name("config")]:
        if candidate.is_file():
            return str(candidate)
    return None
