"""The systemd unit that continues a kexec session after every boot, and the watchdog setting beside it.

``perfab kexec unit`` prints the unit; ``--install`` writes it to
``/etc/systemd/system/perfab-kexec.service`` and enables it.  The unit is
``Type=exec``: its start job ends as soon as perfab runs, so the boot
completes, and perfab itself waits for the system to settle
(``systemctl is-system-running --wait``) before a boot's runs.  It starts
only when a session is in progress (``ConditionPathExists=`` on the state
file), so an enabled unit costs nothing between sessions.

``--watchdog SECONDS`` also writes a systemd drop-in that arms the
hardware watchdog for every kexec (``KExecWatchdogSec=``) and lets systemd
keep it fed once the new system runs (``RuntimeWatchdogSec=``): a side's
kernel that hangs before systemd takes the watchdog over is reset, and the
firmware boots the bootloader's default entry, which perfab never changes.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from perfab.errors import ToolError

UNIT_NAME = "perfab-kexec.service"
UNIT_DIR = Path("/etc/systemd/system")
DROPIN = Path("/etc/systemd/system.conf.d/perfab-kexec.conf")
RUNTIME_WATCHDOG_S = 60  # systemd feeds the watchdog at half this interval once it runs


def unit_text(state_dir: Path, perfab: str | None = None) -> str:
    """The unit file for a machine whose kexec state lives in ``state_dir``."""
    command = perfab or default_command()
    state = state_dir / "session.json"
    return f"""[Unit]
Description=perfab: continue the kexec session after each boot
Documentation=man:kexec(8)
After=local-fs.target network-online.target
Wants=network-online.target
ConditionPathExists={state}

[Service]
Type=exec
Environment=PERFAB_KEXEC_STATE={state_dir}
ExecStart={command} kexec resume
StandardOutput=journal+console
StandardError=journal+console
TimeoutStopSec=60

[Install]
WantedBy=multi-user.target
"""


def default_command() -> str:
    """This perfab: the ``perfab`` script beside this Python (a virtualenv's), else ``python -m perfab.cli``."""
    script = Path(sys.executable).parent / "perfab"
    return str(script) if script.is_file() else shlex.join([sys.executable, "-m", "perfab.cli"])


def dropin_text(kexec_watchdog_s: int) -> str:
    """systemd's manager settings that arm the hardware watchdog across each kexec."""
    return f"""[Manager]
# Written by `perfab kexec unit --install --watchdog {kexec_watchdog_s}`: a kernel switched to by kexec must
# boot far enough for systemd to take the hardware watchdog over within {kexec_watchdog_s} s, or the machine
# is reset into the bootloader's default entry.
KExecWatchdogSec={kexec_watchdog_s}s
RuntimeWatchdogSec={RUNTIME_WATCHDOG_S}s
"""


def install(text: str, watchdog_s: int | None, unit_dir: Path = UNIT_DIR, dropin: Path = DROPIN,
            systemctl: str = "systemctl") -> list[str]:
    """Write the unit (and the watchdog drop-in), reload systemd and enable the unit; the paths written."""
    path = unit_dir / UNIT_NAME
    written = [_write(path, text)]
    if watchdog_s is not None:
        written.append(_write(dropin, dropin_text(watchdog_s)))
    for argv in ([systemctl, "daemon-reload"], [systemctl, "enable", UNIT_NAME]):
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise ToolError(f"`{' '.join(argv)}` failed: {said[-1] if said else 'no message'}; "
                            f"{path} is written, enable it by hand")
    return written


def _write(path: Path, text: str) -> str:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise ToolError(f"cannot write {path} ({e.strerror}); run as root, or write the printed unit by hand") \
            from None
    return str(path)
