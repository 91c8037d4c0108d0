"""Kernel sides that cannot boot, refused by the one pre-flight ``plan`` and ``run`` share, before anything is stored.

Every situation is tried twice, as in ``test_rel_specs``: ``perfab plan`` and
``perfab run`` against a database holding a finished session, which must
come out byte for byte unchanged.  Each refusal is one line naming the key
and the fix.  No guest boots here: images are read, not booted (Debian's
prebuilt kernel is the good image), so the whole file costs seconds.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import stat
from pathlib import Path

import pytest

from reliability_helpers import cli, file_digest, stored_db, write

IMAGES = sorted(glob.glob("/boot/vmlinuz-*"))
pytestmark = pytest.mark.skipif(not IMAGES, reason="needs linux-image-amd64 (make sysdeps)")
IMG = IMAGES[-1] if IMAGES else ""
IMAGE_FIX = r"[^;]*; give a bzImage \(e\.g\. /boot/vmlinuz-\$\(uname -r\) or arch/x86/boot/bzImage\) or fix the path$"
SYMBOLS_FIX = (r"[^;]*; give the kernel's System\.map or vmlinux, or remove symbols \(the guest's /proc/kallsyms "
               r"then names the code\)$")
PSEUDO = (r"is under /(proc|sys|dev)( \(it leads to [^)]+\))?, a kernel file system whose files are made as they are "
          r"read \(a guest has its own\); copy what the workload needs into a regular file and list that$")
NOT_REGULAR = r"; list regular files \(or directories of them\) only$"


def spec(a: str = f'image = "{IMG}"', b: str = f'image = "{IMG}"\ncmdline = "pti=on"', measure: str = "",
         workload: str = 'argv = ["/bin/true"]', vars_a: str = "", metric: str = "") -> str:
    """Two kernel sides booting Debian's image under the guest backend, with the table lines given."""
    return (f'[experiment]\nname = "ksides"\nruns = 1\nwarmup = 0\n\n[[variant]]\nname = "a"\n{vars_a}\n'
            f'[variant.kernel]\n{a}\n\n[[variant]]\nname = "b"\n[variant.kernel]\n{b}\n\n'
            f'[[workload]]\nname = "w"\n{workload}\n{metric}\n[measure]\nbackend = "guest"\naccel = "tcg"\n{measure}\n')


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    return stored_db(tmp_path_factory.mktemp("kept"))


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """Files that are not what a kernel side wants: FIFOs, sockets, text, truncated headers, huge sparse files."""
    z = tmp_path_factory.mktemp("zoo")
    os.mkfifo(z / "fifo")
    write(z / "text", "not a kernel\n" * 100)
    write(z / "empty", b"")
    head = Path(IMG).read_bytes()[:0x1000]
    write(z / "truncated", head[:0x100])
    write(z / "no-magic", head[:0x202] + b"XXXX" + head[0x206:])
    write(z / "no-boot-flag", head[:0x1FE] + b"\0\0" + head[0x200:])
    write(z / "random", os.urandom(8192))
    write(z / "script", "#!/bin/sh\necho hi\n")
    write(z / "elf-truncated", b"\x7fELF\x02\x01\x01" + b"\0" * 9)
    (z / "to-zero").symlink_to("/dev/zero")
    (z / "loop1").symlink_to(z / "loop2")
    (z / "loop2").symlink_to(z / "loop1")
    (z / "dangling").symlink_to(z / "nowhere")
    write(z / "good.map", "ffffffff81000000 T _text\nffffffff81000100 t do_one\n")
    write(z / "data.map", "ffffffff82000000 D some_data\nffffffff82000100 B some_bss\n")
    write(z / "crlf.map", "ffffffff81000000 T _text\r\nffffffff81000100 t do_one\r\n")
    write(z / "short.map", "81000000 T\n")
    shutil.copy(glob.glob("/boot/System.map-*")[-1] if glob.glob("/boot/System.map-*") else z / "text",
                z / "placeholder.map")
    for d in ("with-fifo", "with-socket", "with-devlink", "with-loop", "fine"):
        (z / d).mkdir()
        write(z / d / "data.txt", "payload\n")
    os.mkfifo(z / "with-fifo" / "pipe")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(z / "with-socket" / "sock"))
    s.close()
    (z / "with-devlink" / "null").symlink_to("/dev/null")
    (z / "with-loop" / "self").symlink_to(z / "with-loop" / "self")
    with open(z / "sparse-300M", "wb") as f:
        f.truncate(300 << 20)
    with open(z / "sparse-100M", "wb") as f:
        f.truncate(100 << 20)
    write(z / "bash.sh", "#!/bin/bash\necho hi\n").chmod(0o755)
    write(z / "env-python.py", "#!/usr/bin/env python3\nprint('hi')\n").chmod(0o755)
    write(z / "sh.sh", "#!/bin/sh\necho hi\n").chmod(0o755)
    write(z / "busybox-sh.sh", "#!/bin/busybox sh\necho hi\n").chmod(0o755)
    write(z / "empty-shebang.sh", "#!\necho hi\n").chmod(0o755)
    write(z / "awk.awk", "#!/usr/bin/awk -f\nBEGIN { print 1 }\n").chmod(0o755)
    return z


B = 'cmdline = "pti=on"'  # side b's own line, after its image


def image(path: str) -> str:
    return spec(b=f'image = "{path}"\n{B}')


def symbols(path: str) -> str:
    return spec(b=f'image = "{IMG}"\nsymbols = "{path}"')


def files(*paths: str, extra: str = "") -> str:
    return spec(measure=f"files = {list(paths)!r}".replace("'", '"') + f"\n{extra}")


IMAGE_B = r"perfab: k\.toml: side 'b': variant\.kernel\.image "
SYMBOLS_B = r"perfab: k\.toml: side 'b': variant\.kernel\.symbols "
FILES = r"perfab: k\.toml: measure\.files: "
CASES = {  # situation -> (spec text, with {zoo} for the zoo's path; the one stderr line, a regex)
    "image-missing": (image("{zoo}/nowhere"), IMAGE_B + r"\S+/nowhere does not exist" + IMAGE_FIX),
    "image-directory": (image("{zoo}"), IMAGE_B + r"\S+ is a directory, not a kernel image" + IMAGE_FIX),
    "image-dev-null": (image("/dev/null"), IMAGE_B + r"/dev/null is a character device, not a kernel image" +
                       IMAGE_FIX),
    "image-dev-zero": (image("/dev/zero"), IMAGE_B + r"/dev/zero is a character device, not a kernel image" +
                       IMAGE_FIX),
    "image-fifo": (image("{zoo}/fifo"), IMAGE_B + r"\S+/fifo is a FIFO, not a kernel image" + IMAGE_FIX),
    "image-symlink-to-dev-zero": (image("{zoo}/to-zero"), IMAGE_B + r"\S+/to-zero is a character device, not a "
                                                                   r"kernel image" + IMAGE_FIX),
    "image-symlink-loop": (image("{zoo}/loop1"), IMAGE_B + r"\S+/loop1 cannot be read \(Too many levels of symbolic "
                                                           r"links\)" + IMAGE_FIX),
    "image-dangling-symlink": (image("{zoo}/dangling"), IMAGE_B + r"\S+/dangling does not exist" + IMAGE_FIX),
    "image-text": (image("{zoo}/text"), IMAGE_B + r"\S+/text is not a bzImage \(no HdrS boot header at 0x202\) nor an "
                                                  r"ELF vmlinux \(it is text\)" + IMAGE_FIX),
    "image-empty": (image("{zoo}/empty"), IMAGE_B + r"\S+/empty is not a bzImage .* \(it is empty\)" + IMAGE_FIX),
    "image-etc-passwd": (image("/etc/passwd"), IMAGE_B + r"/etc/passwd is not a bzImage .*\(it is text\)" + IMAGE_FIX),
    "image-bin-true": (image("/bin/true"), IMAGE_B + r"/bin/true is an ELF file without a PVH note "
                                                     r"\(XEN_ELFNOTE_PHYS32_ENTRY\), which QEMU cannot enter directly "
                                                     r"\(a vmlinux needs CONFIG_PVH=y\)" + IMAGE_FIX),
    "image-script": (image("{zoo}/script"), IMAGE_B + r"\S+/script is not a bzImage .* \(it is a script\)" + IMAGE_FIX),
    "image-truncated-header": (image("{zoo}/truncated"), IMAGE_B + r"\S+/truncated is not a bzImage" + IMAGE_FIX),
    "image-setup-magic-damaged": (image("{zoo}/no-magic"), IMAGE_B + r"\S+/no-magic is not a bzImage \(no HdrS" +
                                  IMAGE_FIX),
    "image-boot-flag-damaged": (image("{zoo}/no-boot-flag"), IMAGE_B + r"\S+/no-boot-flag is not a bzImage" +
                                IMAGE_FIX),
    "image-random-bytes": (image("{zoo}/random"), IMAGE_B + r"\S+/random is not a bzImage" + IMAGE_FIX),
    "image-elf-header-only": (image("{zoo}/elf-truncated"), IMAGE_B + r"\S+/elf-truncated is an ELF file without a "
                                                                      r"PVH note" + IMAGE_FIX),
    "image-proc-self-exe": (image("/proc/self/exe"), IMAGE_B + r"/proc/self/exe is an ELF file without a PVH note" +
                            IMAGE_FIX),
    "image-system-map": (image("/boot/System.map-" + IMG.split("vmlinuz-")[-1]), IMAGE_B + r"\S+ is not a bzImage" +
                         IMAGE_FIX),
    "symbols-missing": (symbols("{zoo}/nowhere.map"), SYMBOLS_B + r"\S+/nowhere\.map does not exist" + SYMBOLS_FIX),
    "symbols-etc-passwd": (symbols("/etc/passwd"), SYMBOLS_B + r"/etc/passwd is not a System\.map \(lines \"ADDR "
                                                                r"TYPE NAME\" naming code\) nor an ELF vmlinux" +
                           SYMBOLS_FIX),
    "symbols-directory": (symbols("{zoo}"), SYMBOLS_B + r"\S+ is a directory, not a System\.map or vmlinux" +
                          SYMBOLS_FIX),
    "symbols-fifo": (symbols("{zoo}/fifo"), SYMBOLS_B + r"\S+/fifo is a FIFO, not a System\.map or vmlinux" +
                     SYMBOLS_FIX),
    "symbols-dev-null": (symbols("/dev/null"), SYMBOLS_B + r"/dev/null is a character device, not a System\.map or "
                                                           r"vmlinux" + SYMBOLS_FIX),
    "symbols-debian-placeholder": (symbols("{zoo}/placeholder.map"), SYMBOLS_B + r"\S+ is Debian's placeholder, not a "
                                   r"symbol map; install the kernel's -dbg package for the real one, or remove symbols "
                                   r"\(the guest's /proc/kallsyms then names the code\)$"),
    "symbols-random": (symbols("{zoo}/random"), SYMBOLS_B + r"\S+/random is not a System\.map" + SYMBOLS_FIX),
    "symbols-empty": (symbols("{zoo}/empty"), SYMBOLS_B + r"\S+/empty is not a System\.map" + SYMBOLS_FIX),
    "symbols-user-elf": (symbols("/bin/true"), SYMBOLS_B + r"/bin/true is an ELF file that is not a kernel \(no code "
                                                           r"loaded in the kernel's half of the address space\)" +
                         SYMBOLS_FIX),
    "symbols-no-code": (symbols("{zoo}/data.map"), SYMBOLS_B + r"\S+/data\.map is not a System\.map" + SYMBOLS_FIX),
    "symbols-two-fields": (symbols("{zoo}/short.map"), SYMBOLS_B + r"\S+/short\.map is not a System\.map" +
                           SYMBOLS_FIX),
    "symbols-the-image": (symbols(IMG), SYMBOLS_B + r"\S+ is not a System\.map" + SYMBOLS_FIX),
    "symbols-symlink-to-dev-zero": (symbols("{zoo}/to-zero"), SYMBOLS_B + r"\S+/to-zero is a character device, not "
                                                                       r"a System\.map or vmlinux" +
                                    SYMBOLS_FIX),
    "files-missing": (files("{zoo}/nowhere"), FILES + r"'\S+/nowhere' does not exist on this machine; fix the path or "
                                                      r"remove it$"),
    "files-relative-missing": (files("no/such/data"), FILES + r"'no/such/data' does not exist on this machine; fix "
                                                              r"the path or remove it$"),
    "files-fifo": (files("{zoo}/fifo"), FILES + r"'\S+/fifo' is a FIFO" + NOT_REGULAR),
    "files-dev-zero": (files("/dev/zero"), FILES + r"'/dev/zero' " + PSEUDO),
    "files-dev": (files("/dev"), FILES + r"'/dev' " + PSEUDO),
    "files-proc": (files("/proc"), FILES + r"'/proc' " + PSEUDO),
    "files-proc-cpuinfo": (files("/proc/cpuinfo"), FILES + r"'/proc/cpuinfo' " + PSEUDO),
    "files-proc-self-mem": (files("/proc/self/mem"), FILES + r"'/proc/self/mem' " + PSEUDO),
    "files-sys": (files("/sys/kernel"), FILES + r"'/sys/kernel' " + PSEUDO),
    "files-symlink-to-dev-zero": (files("{zoo}/to-zero"), FILES + r"'\S+/to-zero' " + PSEUDO),
    "files-dir-with-fifo": (files("{zoo}/with-fifo"), FILES + r"'\S+/with-fifo' holds \S+/pipe, which is a FIFO" +
                            NOT_REGULAR),
    "files-dir-with-socket": (files("{zoo}/with-socket"), FILES + r"'\S+/with-socket' holds \S+/sock, which is a "
                                                                  r"socket" + NOT_REGULAR),
    "files-dir-with-link-to-dev": (files("{zoo}/with-devlink"), FILES + r"'\S+/with-devlink' holds \S+/null, which "
                                   + PSEUDO),
    "files-dir-with-link-loop": (files("{zoo}/with-loop"), FILES + r"'\S+/with-loop' holds \S+/self, which cannot be "
                                                                   r"read \(Too many levels of symbolic links\); fix "
                                                                   r"or remove it$"),
    "files-dangling-symlink": (files("{zoo}/dangling"), FILES + r"'\S+/dangling' does not exist on this machine"),
    "files-over-256-MiB": (files("{zoo}/sparse-300M"), FILES + r"more than 256 MiB or 100,000 files \(at \S+\); every "
                                                               r"guest carries them in its initramfs: list only the "
                                                               r"files the workload reads$"),
    "files-over-half-the-memory": (files("{zoo}/sparse-100M", extra="memory = 192"),
                                   FILES + r"100\.0 MiB, more than half of the guest's 192 MiB \(the guest unpacks "
                                           r"them into its RAM\); raise measure\.memory or list fewer files$"),
    "cmdline-3400-bytes": (spec(b=f'image = "{IMG}"\ncmdline = "{"x" * 3400}"'),
                           r"perfab: k\.toml: side 'b': variant\.kernel\.cmdline: the guest's command line would be "
                           r"3,\d{3} bytes \(perfab's \d+ and this side's\), and the kernel takes at most 2,047 \(a "
                           r"longer one boots to nothing\); shorten cmdline$"),
    "cmdline-past-the-limit-with-a-boot-word": (spec(b=f'image = "{IMG}"\ncmdline = "{"x" * (2047 - 126)}"'),
                                                r"perfab: k\.toml: side 'b': variant\.kernel\.cmdline: the guest's "
                                                r"command line would be 2,048 bytes \(perfab's \d+ and this side's\)"),
    "cmdline-unknown-placeholder": (spec(b=f'image = "{IMG}"\ncmdline = "x={{nope}}"'),
                                    r"perfab: k\.toml: side 'b': variant\.kernel\.cmdline: unknown placeholder "
                                    r"\{nope\}; known: \{experiment\}, \{variant\} \(a kernel belongs to its side: "
                                    r"\{workload\} and sweep parameters are not known here\)$"),
    "cmdline-workload-placeholder": (spec(b=f'image = "{IMG}"\ncmdline = "w={{workload}}"'),
                                     r"side 'b': variant\.kernel\.cmdline: unknown placeholder \{workload\}"),
    "cmdline-src-placeholder": (spec(b=f'image = "{IMG}"\ncmdline = "{{src}}"'),
                                r"side 'b': variant\.kernel\.cmdline: \{src\} is defined only for a side built from "
                                r"git"),
    "image-unknown-placeholder": (spec(b='image = "/boot/{kernel}"'),
                                  r"side 'b': variant\.kernel\.image: unknown placeholder \{kernel\}"),
    "image-placeholder-of-another-side": (spec(vars_a=f'vars = {{img = "{IMG}"}}', b='image = "{img}"'),
                                          r"side 'b': variant\.kernel\.image: unknown placeholder \{img\}"),
    "symbols-unknown-placeholder": (spec(b=f'image = "{IMG}"\nsymbols = "{{map}}"'),
                                    r"side 'b': variant\.kernel\.symbols: unknown placeholder \{map\}"),
    "image-expands-to-nothing-there": (spec(a='image = "/boot/vmlinuz-{variant}"'),
                                       r"side 'a': variant\.kernel\.image /boot/vmlinuz-a does not exist"),
    "cache-sim-under-kvm": (spec(measure="cache_sim = true").replace('accel = "tcg"', 'accel = "kvm"'),
                            r"perfab: k\.toml: measure\.cache_sim needs perfab's TCG plugin, which does not run under "
                            r"KVM; set \[measure\] accel = \"tcg\" \(or \"auto\", which then emulates\)$"),
    "plugin-row-under-kvm": (spec(metric='[[workload.metric]]\nname = "instructions:k"\n').replace(
                                 'accel = "tcg"', 'accel = "kvm"'),
                             r"perfab: k\.toml: the metric 'instructions:k' of workload 'w' needs perfab's TCG "
                             r"plugin, which does not run under KVM"),
    "plugin-cache-row-under-kvm": (spec(metric='[[workload.metric]]\nname = "I1 misses:k"\n').replace(
                                       'accel = "tcg"', 'accel = "kvm"'), r"the metric 'I1 misses:k' of workload 'w' "
                                                                          r"needs perfab's TCG plugin"),
    "memory-64-MiB": (spec(measure="memory = 64"),
                      r"perfab: k\.toml: measure\.memory = 64 MiB is too little for the kernel of side 'a': it fills "
                      r"guest memory up to \d+ MiB while it starts \(its load address and size\) and the initramfs "
                      r"comes after it; set memory = 96 or more$"),
    "memory-80-MiB": (spec(measure="memory = 80"),
                      r"measure\.memory = 80 MiB is too little .*set memory = 96 or more$"),
    "script-for-env-python": (spec(workload='argv = ["{zoo}/env-python.py"]'),
                              r"perfab: k\.toml: workload 'w', side 'a': argv\[0\] \S+/env-python\.py is a script "
                              r"for /usr/bin/env python3, and the guest has no python3 "
                              r"\(its initramfs holds busybox sh, "
                              r"the script's interpreter and the files perfab copies in\); add \"\S*python3\" to "
                              r"measure\.files, or set measure\.root = \"host\"$"),
    "script-for-env-with-env-listed": (spec(workload='argv = ["{zoo}/env-python.py"]',
                                            measure='files = ["/usr/bin/env"]'),
                                       r"is a script for /usr/bin/env python3, and the guest has no python3 .*add "
                                       r"\"\S*python3\" to measure\.files"),
    "script-with-empty-shebang": (spec(workload='argv = ["{zoo}/empty-shebang.sh"]'),
                                  r"argv\[0\] \S+ is a script with an empty #! line; name its interpreter, e.g. "
                                  r"#!/bin/sh$"),
    "kernel-ref-on-the-tarball": (spec(b='ref = "v6.1"'),
                                  r"variant\.kernel\.ref = 'v6\.1' names a git commit, but the source "
                                  r"/usr/src/linux-source-6\.1\.tar\.xz \(the default source, Debian's linux-source\) "
                                  r"is a tarball; set variant\.kernel\.source to a git clone of Linux, or remove ref$"),
    "kernel-ref-on-a-plain-directory": (spec(b='source = "{zoo}"\nref = "main"'),
                                        r"variant\.kernel\.ref = 'main' names a git commit, but the source \S+ is a "
                                        r"directory that is no git repository"),
    "kernel-source-not-linux": (spec(b='source = "{zoo}/notlinux"'),
                                r"\S+/notlinux is not a Linux kernel source for x86: its Kconfig files define none of "
                                r"64BIT, ACPI, BINFMT_ELF, BINFMT_SCRIPT \.\.\. \(20 of the 20 options every x86 Linux "
                                r"has and perfab sets to boot a guest\); give a Linux tree, tarball or git repository "
                                r"as source$"),
}


def refused(tmp_path: Path, kept: Path, text: str, pattern: str) -> None:
    """``plan`` and ``run`` both exit 2 with one line matching ``pattern``; the database is untouched."""
    write(tmp_path / "k.toml", text)
    db = shutil.copy(kept, tmp_path / "results.db")
    before = file_digest(db)
    for argv in (("plan", "k.toml"), ("run", "k.toml", "--db", "results.db")):
        got = cli(*argv, cwd=tmp_path)
        got.one_line_error(2, pattern)
        assert got.out == ""
    assert file_digest(db) == before


@pytest.mark.parametrize("name", list(CASES))
def test_a_kernel_side_that_cannot_boot_is_refused_before_anything_is_stored(tmp_path, kept, zoo, name):
    text, pattern = CASES[name]
    if name == "kernel-source-not-linux":
        write(zoo / "notlinux" / "Makefile", "all:\n")
        write(zoo / "notlinux" / "Kconfig", 'config FOO\n\tbool "foo"\n')
    refused(tmp_path, kept, text.replace("{zoo}", str(zoo)), pattern)


ACCEPTED = {  # situation -> (spec text, a line plan prints)
    "cmdline-expands-variant": (spec(b=f'image = "{IMG}"\ncmdline = "x={{variant}} e={{experiment}}"'),
                                "cmdline 'x=b e=ksides'"),
    "image-from-the-sides-vars": (spec(vars_a=f'vars = {{img = "{IMG}"}}', a='image = "{img}"'),
                                  f"kernel a: boots {IMG} (release "),
    "cmdline-literal-braces": (spec(b=f'image = "{IMG}"\ncmdline = "x={{{{y}}}}"'), "cmdline 'x={y}'"),
    # perfab's options and a boot's perturbation word (up to 76 bytes, experiment.perturb) leave 1,920 to a side
    "cmdline-at-the-limit": (spec(b=f'image = "{IMG}"\ncmdline = "{"x" * (2047 - 127)}"'), "kernel b: boots"),
    "script-for-sh": (spec(workload='argv = ["{zoo}/sh.sh"]'), "kernel a: boots"),
    "script-for-bash-carried-with-its-interpreter": (spec(workload='argv = ["{zoo}/bash.sh"]'), "kernel a: boots"),
    "script-for-awk-carried-with-its-interpreter": (spec(workload='argv = ["{zoo}/awk.awk"]'), "kernel a: boots"),
    "script-for-env-python-on-the-hosts-root": (spec(workload='argv = ["{zoo}/env-python.py"]',
                                                     measure='root = "host"'),
                                                "kernel a: boots"),
    "script-for-busybox": (spec(workload='argv = ["{zoo}/busybox-sh.sh"]'), "kernel a: boots"),
    "script-for-bash-with-bash-listed": (spec(workload='argv = ["{zoo}/bash.sh"]', measure='files = ["/bin/bash"]'),
                                         "kernel a: boots"),
    "files-directory-of-regular-files": (files("{zoo}/fine"), "kernel a: boots"),
    "symbols-a-real-system-map": (symbols("{zoo}/good.map"), "kernel b: boots"),
    "symbols-crlf-system-map": (symbols("{zoo}/crlf.map"), "kernel b: boots"),
    "memory-96-MiB-boots-debian": (spec(measure="memory = 96"), "96 MiB"),
    "prebuilt-network-is-loopback": (spec(), "network a: loopback only: the guest has no network device"),
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_what_a_guest_can_take_is_planned(tmp_path, zoo, name):
    text, line = ACCEPTED[name]
    write(tmp_path / "k.toml", text.replace("{zoo}", str(zoo)))
    got = cli("plan", "k.toml", cwd=tmp_path)
    assert got.code == 0 and "Traceback" not in got.err, got.err
    assert line in got.out, got.out


def test_a_host_interrupt_row_this_machine_lacks_is_refused(tmp_path, kept):
    """The host backends read /proc/interrupts around each run: a row it lacks would never count."""
    text = ('[experiment]\nname = "irq"\nruns = 1\n[[variant]]\nname = "a"\n[[variant]]\nname = "b"\n'
            '[[workload]]\nname = "w"\nargv = ["true"]\n[measure]\ninterrupts = ["NOSUCHIRQ"]\n')
    refused(tmp_path, kept, text, r"perfab: k\.toml: measure\.interrupts: no row 'NOSUCHIRQ' in this machine's "
                                  r"/proc/interrupts \(its rows are the names before the colon, e\.g\. TLB, CAL, "
                                  r"RES\); remove it or name a row this machine has$")


def test_a_host_interrupt_row_this_machine_has_is_counted(tmp_path):
    row = next(line.split(":")[0].strip() for line in Path("/proc/interrupts").read_text().splitlines()[1:])
    text = ('[experiment]\nname = "irq"\nruns = 1\n[[variant]]\nname = "a"\n[[variant]]\nname = "b"\n'
            f'[[workload]]\nname = "w"\nargv = ["true"]\n[measure]\ninterrupts = ["{row}"]\n')
    write(tmp_path / "k.toml", text)
    got = cli("run", "k.toml", "--db", "r.db", "--format", "json", cwd=tmp_path)
    assert got.code == 0, got.err
    assert f'"interrupts.{row}"' in got.out


@pytest.fixture(scope="module")
def debian_tree():
    """Debian's 6.1 source in the project's kernel cache (shared with tests/kernel_build)."""
    from perfab.kernel import source as ksource

    if not ksource.DEBIAN_TARBALL.is_file():
        pytest.skip("needs linux-source-6.1 (make kernel-deps)")
    cache = Path(os.environ.get("PERFAB_KERNEL_CACHE", Path(__file__).resolve().parents[2] / ".perfab" / "kernel"))
    identity = ksource.identify(None, None, cache.resolve())
    ksource.tree_for(None, identity, cache.resolve(), lambda line: None)
    return cache.resolve()


@pytest.mark.parametrize("option, value, words", [
    ("SMP", "maybe", 'SMP = "maybe": SMP is a bool option, which takes "y" or "n"'),
    ("NR_CPUS", "many", 'NR_CPUS = "many": NR_CPUS is an int option, which takes a decimal number'),
    ("PHYSICAL_START", "0xzz", 'PHYSICAL_START = "0xzz": PHYSICAL_START is a hex option, which takes a hex number'),
])
def test_a_kernel_option_of_the_wrong_type_is_named_as_such(tmp_path, kept, debian_tree, monkeypatch, option, value,
                                                            words):
    """Not explained as a Kconfig dependency (olddefconfig drops it for its value, not for what it depends on)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".perfab").mkdir()
    (tmp_path / ".perfab" / "kernel").symlink_to(debian_tree)
    text = spec(b=f'config = {{ {option} = "{value}" }}')
    refused(tmp_path, kept, text, "perfab: kernel option " + re.escape(words) +
            r"; fix the value in variant\.kernel\.config$")


@pytest.mark.parametrize("config, line", [
    ("", "network b: loopback only"),  # perfab adds NET and INET to a tinyconfig
    ('config = { NET = "y", INET = "y" }', "network b: loopback only"),
    ('config = { NET = "n" }', "network b: none: the guest has no network device, and this kernel no network stack (a "
                               'workload that opens a socket fails); keep config NET = "y", INET = "y" for loopback'),
])
def test_plan_says_what_network_a_built_guest_has(tmp_path, debian_tree, monkeypatch, config, line):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".perfab").mkdir()
    (tmp_path / ".perfab" / "kernel").symlink_to(debian_tree)
    write(tmp_path / "k.toml", spec(b=f'base = "tinyconfig"\n{config}'))
    got = cli("plan", "k.toml", cwd=tmp_path)
    assert got.code == 0, got.err
    assert line in got.out, got.out


def test_file_modes_survive_the_zoo(zoo):
    """The zoo is what it claims: a FIFO, a socket, a sparse file (else the refusals above prove nothing)."""
    assert stat.S_ISFIFO(os.stat(zoo / "fifo").st_mode)
    assert stat.S_ISSOCK(os.lstat(zoo / "with-socket" / "sock").st_mode)
    assert os.stat(zoo / "sparse-300M").st_size == 300 << 20
