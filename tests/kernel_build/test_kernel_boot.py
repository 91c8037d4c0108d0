"""A whole tiny kernel: built from Debian's 6.1 tree, cached, booted under TCG on 2 vCPUs.

A cold build takes minutes on 2 cores, so this runs under `make
kernel-studies` (PERFAB_KERNEL_BUILDS=1), or whenever the project's kernel
cache already holds the build (then it costs a boot).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from kbuild_guest import boot, initramfs
from perfab.kernel.build import KernelRequest, build_kernel, check_kernel
from perfab.kernel.config import GUEST_OPTIONS, read_config

pytestmark = pytest.mark.kernel_build
REQUEST = KernelRequest(jobs=2)


@pytest.fixture(scope="module")
def built(shared_cache: Path):
    """The tiny kernel, built now only when asked to or already cached."""
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 is absent; run `make kernel-deps`")
    if os.environ.get("PERFAB_KERNEL_BUILDS") != "1" and not check_kernel(REQUEST, shared_cache, print).cached:
        pytest.skip("builds a kernel (minutes): run under `make kernel-studies` or set PERFAB_KERNEL_BUILDS=1")
    first = build_kernel(REQUEST, shared_cache, print)
    again = build_kernel(REQUEST, shared_cache, print)
    return first, again


def test_second_build_is_a_cache_hit_with_every_artifact(built):
    first, again = built
    assert again.cached and again.key == first.key and again.bzimage == first.bzimage
    for path in (first.bzimage, first.vmlinux, first.system_map, first.config, first.log):
        assert path.is_file() and path.stat().st_size > 0, path
    assert first.vmlinux.read_bytes()[:4] == b"\x7fELF"
    assert re.search(r"^[0-9a-f]{16} T start_kernel$", first.system_map.read_text(), re.M)
    assert "bzImage is ready" in first.log.read_text()


def test_resolved_config_holds_every_boot_option(built):
    resolved = read_config(built[0].config)
    for name, value in GUEST_OPTIONS.items():
        assert resolved.get(name) == value, name


def test_tiny_kernel_boots_sees_both_cpus_and_powers_off(built, tmp_path: Path):
    guest = boot(built[0].bzimage, initramfs(tmp_path / "initrd.gz"), cpus=2, timeout_s=180)
    tail = guest.console[-2000:]
    assert "PERFAB-INIT" in guest.console, tail
    line = next(x for x in guest.console.splitlines() if "PERFAB-INIT" in x)
    assert "cpus=2 online=0-1" in line, line
    assert "PERFAB-POWEROFF" in guest.console and "reboot: Power down" in guest.console, tail
    assert guest.exit_code == 0, tail
