"""A machine for the kexec session's tests: it "boots" by changing the kernel it reports, and can fail to.

``FakeMachine`` keeps a directory tree standing for ``/`` (``proc/``,
``sys/``) that the checks read, reports a running kernel, and on
``switch`` reports the loaded kernel instead (its release and build id,
the command line kexec was given), as the real machine would after the
reboot; ``fail_next`` makes the next switch come back in the fallback
kernel instead (the side's kernel panicked and the firmware booted the
default entry).  Every call is recorded.  The runs themselves are real:
the runner executes real programs with the real executor.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from perfab.kexec.checks import Host
from perfab.kexec.driver import Context
from perfab.kexec.identity import KernelIdentity
from perfab.kexec.state import StateFile
from perfab.run.backends import make_backend
from perfab.run.executor import RealExecutor
from perfab.run.runner import Runner

IMAGE = next(iter(sorted(Path("/boot").glob("vmlinuz-6.1.0-*-amd64"))), None)  # Debian's signed 6.1 image
HOME = KernelIdentity("6.1.0-home", "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet", "feedface" * 5)


def host_tree(root: Path, kexec: bool = True, disabled: bool = False, lockdown: str | None = None,
              pmu: bool = True, init: str = "init") -> Host:
    """A ``/`` with what the checks read: kexec support, kexec_load_disabled, lockdown, a PMU, init's name."""
    (root / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc/1").mkdir(parents=True, exist_ok=True)
    (root / "sys/kernel/security").mkdir(parents=True, exist_ok=True)
    (root / "sys/bus/event_source/devices/software").mkdir(parents=True, exist_ok=True)
    (root / "proc/1/comm").write_text(init + "\n")
    (root / "proc/sys/kernel/kexec_load_disabled").write_text("1\n" if disabled else "0\n")
    if kexec:
        (root / "sys/kernel/kexec_loaded").write_text("0\n")
    if lockdown:
        (root / "sys/kernel/security/lockdown").write_text(
            " ".join(f"[{m}]" if m == lockdown else m for m in ("none", "integrity", "confidentiality")) + "\n")
    if pmu:
        (root / "sys/bus/event_source/devices/cpu").mkdir(exist_ok=True)
    return Host(root, euid=0)


@dataclass
class FakeMachine:
    """See the module docstring."""

    host: Host  # the tree the checks read
    current: KernelIdentity = HOME  # the kernel it reports as running
    kexec: str | None = "true"  # a program that exists: the checks look it up
    fail_next: bool = False  # the next switch comes back in ``HOME`` (the fallback entry)
    loaded: tuple | None = None  # (SideKernel, cmdline, file_load) of the last load
    calls: list = field(default_factory=list)  # ("load", side image, cmdline) / ("switch",) / ("end", then)
    booted: list = field(default_factory=list)  # the identities it came back in, in order
    boots: int = 0  # reboots so far: the boot id changes with each

    def boot_id(self) -> str:
        return f"boot-{self.boots}"

    def running(self) -> KernelIdentity:
        return self.current

    def settle(self) -> None:
        self.calls.append(("settle",))

    def load(self, kernel, cmdline: str, file_load: bool) -> None:
        self.loaded = (kernel, cmdline, file_load)
        self.calls.append(("load", kernel.image, cmdline))

    def switch(self) -> None:
        kernel, cmdline, _ = self.loaded
        self.calls.append(("switch",))
        self.current = HOME if self.fail_next else KernelIdentity(kernel.release, cmdline, kernel.build_id)
        self.fail_next = False
        self.boots += 1
        self.booted.append(self.current)

    def end(self, then: str) -> None:
        self.calls.append(("end", then))
        if then in ("reboot", "poweroff"):  # the firmware boots the default entry
            self.current, self.boots = HOME, self.boots + 1


def kexec_spec(tmp: Path, image: Path, runs: int = 2, backend: str = 'backend = "time"', extra: str = "",
               side_b: str = "pti=off") -> Path:
    """A spec of two sides that boot ``image`` with two command lines, measured by a real program."""
    text = f"""
[experiment]
name = "kx"
runs = {runs}
warmup = 0
seed = 3
{extra}
[[variant]]
name = "on"
[variant.kernel]
boot = "kexec"
image = "{image}"
cmdline = "pti=on"
[[variant]]
name = "off"
[variant.kernel]
boot = "kexec"
image = "{image}"
cmdline = "{side_b}"
[[workload]]
name = "true"
argv = ["/bin/true"]
[measure]
{backend}
"""
    path = tmp / "kx.toml"
    path.write_text(text)
    return path


class Bench:
    """A kexec session's context on a fake machine, with a real runner per store (close it after use)."""

    def __init__(self, tmp: Path, machine: FakeMachine, cache: Path):
        self.machine = machine
        self.states = StateFile(tmp / "state")
        self.lines: list[str] = []
        self.executor = RealExecutor().__enter__()
        self.ctx = Context(machine, self.states, self._runner, self.lines.append, cache)

    def _runner(self, exp, store):
        return Runner(exp, store, make_backend(exp.measure), self.executor, {"host": "test"}, say=self.lines.append)

    def close(self) -> None:
        self.executor.__exit__(None, None, None)


def copy_image(tmp: Path, image: Path, config_edit=None, unsign: bool = False) -> Path:
    """A copy of ``image`` in ``tmp`` with its config beside it (edited), or with its signature table cut."""
    target = tmp / image.name
    data = bytearray(image.read_bytes())
    if unsign:
        import struct
        pe, = struct.unpack_from("<I", data, 0x3C)
        struct.pack_into("<II", data, pe + 24 + 112 + 8 * 4, 0, 0)  # PE32+ certificate table entry
    target.write_bytes(bytes(data))
    config = image.with_name("config-" + image.name.removeprefix("vmlinuz-"))
    text = config.read_text()
    (tmp / config.name).write_text(config_edit(text) if config_edit else text)
    return target


def clear(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
