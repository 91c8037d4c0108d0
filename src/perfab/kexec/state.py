"""The kexec session's state on disk: what survives each reboot besides the store.

One file per machine (a machine runs one kernel at a time, so one kexec
session at a time): ``<state dir>/session.json``, written to a temporary
file, flushed to disk, renamed over the old one and the directory flushed,
before every switch of kernel.  It holds where the spec and the store are,
the session, the kernel the session started from (``home``), each side's
kernel, the boot in flight (``pending``: the side, the token on its command
line, when it was switched to and its deadline) and every boot so far, in
order.  The store holds the runs; this file holds what a freshly booted
machine needs to find them and to tell whether the right kernel came back.

The state directory is ``/var/lib/perfab/kexec`` unless ``PERFAB_KEXEC_STATE``
or ``--state-dir`` names another (it must be on a disk that survives a
reboot: not a tmpfs).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from perfab.errors import UsageError

DEFAULT_DIR = Path("/var/lib/perfab/kexec")
ENV_DIR = "PERFAB_KEXEC_STATE"
VERSION = 1  # the file's format; a file of another version is refused, never guessed at
THEN = ("reboot", "home", "poweroff", "stay")  # what the machine does after the last side's runs


@dataclass(frozen=True)
class SideKernel:
    """A side's kernel as the session switches to it."""

    image: str  # the bzImage
    initrd: str | None  # its initramfs, None for none
    cmdline: str  # the side's own command-line words (added to the home kernel's)
    release: str | None  # from the image's header
    build_id: str | None  # from the vmlinux inside it
    boot_timeout_s: float  # seconds it has to come back confirmed


@dataclass(frozen=True)
class Boot:
    """One switch of kernel: asked for (``pending``) or done (``boots``)."""

    number: int  # 1 for the session's first switch
    side: str  # the side whose kernel was loaded
    token: str  # the value of perfab.boot= on its command line
    cmdline: str  # the whole command line kexec was given
    first_seq: int  # the plan position of the first run it carries
    runs: int  # planned runs it carries
    at: float  # unix time of the switch
    boot_id: str = ""  # the boot id of the kernel that asked for the switch: the same one means not switched yet
    outcome: str = "pending"  # pending | confirmed | failed
    seconds: float | None = None  # from the switch to the confirmation (or to the failure's discovery)
    running: dict = field(default_factory=dict)  # the kernel found running after it (KernelIdentity.to_dict)


@dataclass(frozen=True)
class KexecState:
    """Everything a booted machine needs to continue the session (see the module docstring)."""

    spec: str  # absolute path of the spec file
    spec_text: str  # the spec as the session began (a fleet job's spec has no file on this machine)
    spec_hash: str  # the spec's hash when the session began: a changed spec is refused
    db: str  # the store: a path (absolute) or a postgresql:// URL
    cwd: str  # the directory perfab ran in (the spec's relative paths start there)
    experiment: str  # experiment name
    session: int  # session id in the store
    machine: str | None  # the store identity (--machine of a fleet worker); None: the host name
    then: str  # after the last side: reboot, home, poweroff or stay
    file_load: bool  # load with kexec_file_load (kexec -s): the running kernels are locked down
    home: dict  # the kernel the session started from (KernelIdentity.to_dict, plus "image" when found)
    sides: dict[str, SideKernel]  # side -> its kernel
    pending: Boot | None = None  # the switch in flight; None between boots
    boots: tuple[Boot, ...] = ()  # every switch so far, in order
    version: int = VERSION  # format of this file

    def with_boot(self, boot: Boot) -> "KexecState":
        """The state with ``boot`` settled: appended to ``boots``, nothing pending."""
        return replace(self, pending=None, boots=(*self.boots, boot))

    def order(self) -> list[str]:
        """The sides of the confirmed boots, in the order they ran."""
        return [b.side for b in self.boots if b.outcome == "confirmed"]


def state_dir(given: str | None = None) -> Path:
    """The state directory: ``given``, else $PERFAB_KEXEC_STATE, else /var/lib/perfab/kexec."""
    return Path(given or os.environ.get(ENV_DIR) or DEFAULT_DIR)


class StateFile:
    """Reads and durably writes ``session.json`` in a state directory."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)  # where session.json lives
        self.path = self.directory / "session.json"  # the state file

    def read(self) -> KexecState | None:
        """The state, None when no kexec session is in progress; UsageError for a file perfab cannot use."""
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise UsageError(f"{self.path}: unreadable kexec state ({e}); move it away to start over "
                             "(the stored runs stay in the store)") from None
        if raw.get("version") != VERSION:
            raise UsageError(f"{self.path}: kexec state of format {raw.get('version')!r}, this perfab reads "
                             f"{VERSION}; finish the session with the perfab that began it")
        return _from_dict(raw)

    def write(self, state: KexecState) -> None:
        """Replace the file with ``state``, on disk before this returns (file and directory flushed)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(asdict(state), f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _sync_dir(self.directory)

    def remove(self) -> None:
        """The session is over: no state (flushed, so a reboot right after it does not bring it back)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return
        _sync_dir(self.directory)


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # some filesystems (9p) cannot sync a directory; the rename is already theirs
        pass
    finally:
        os.close(fd)


def _from_dict(raw: dict) -> KexecState:
    def boot(d: dict | None) -> Boot | None:
        return None if d is None else Boot(**d)

    raw = dict(raw)
    raw["sides"] = {name: SideKernel(**k) for name, k in raw["sides"].items()}
    raw["pending"] = boot(raw.get("pending"))
    raw["boots"] = tuple(boot(b) for b in raw.get("boots", ()))
    return KexecState(**raw)
