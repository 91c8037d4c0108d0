"""Text from workloads, labels and commit subjects made safe to print on a terminal.

Control characters (C0 but tab and newline, DEL, and the C1 range that
holds CSI, ``\\x9b``) are shown as ``\\xNN``, so an ANSI escape in a
workload's output or a label cannot move the cursor or recolour a report.
"""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what is shown escaped


def visible(text: str) -> str:
    """``text`` with each control character shown as ``\\xNN``."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
