"""Whose session is it: the claim rules every store applies the same way.

A store acts for one machine (``machine``: the host name unless a fleet
worker names its machine with ``--machine``); its claims carry that name,
this boot's id and this process (``perfab.store.owner.Owner``).  A holder
of the same machine and boot is checked through ``/proc``; any other holder
cannot be checked from here and stands until it releases the session or a
user takes it over.  ``claimable`` and ``still_mine`` raise the errors both
stores give, word for word.
"""

from __future__ import annotations

import os
import time

from perfab.errors import StoreError
from perfab.store.owner import Owner, _boot_id, _start_ticks


def identity(machine: str | None = None) -> Owner:
    """This process as a claim, on ``machine`` (default: the host name)."""
    pid = os.getpid()
    return Owner(machine or os.uname().nodename, _boot_id(), pid, _start_ticks(pid) or 0, time.time())


def holds(me: Owner, holder: Owner | None) -> bool:
    """``holder`` is this very process on this machine (the claim's time does not matter)."""
    return holder is not None and (holder.host, holder.boot_id, holder.pid, holder.start_ticks) == \
        (me.host, me.boot_id, me.pid, me.start_ticks)


def alive(holder: Owner, me: Owner) -> bool | None:
    """True or False when it can be told from here (same machine and boot); None otherwise."""
    if holder.host != me.host or holder.boot_id != me.boot_id:
        return None
    return _start_ticks(holder.pid) == holder.start_ticks


def claimable(session: int, holder: Owner | None, me: Owner, takeover: bool) -> None:
    """Nothing when ``me`` may claim the session; StoreError naming the holder when another runner has it."""
    if holder is None or holds(me, holder) or takeover:
        return
    running = alive(holder, me)
    if running is None:
        raise StoreError(f"session {session} is claimed by {holder.describe()}, which cannot be "
                         "checked from here; if that runner is gone, continue with --resume --takeover")
    if running:
        raise StoreError(f"session {session} is being run by {holder.describe()}; wait for it to "
                         "finish or stop it, then continue with --resume")


def still_mine(session: int, holder: Owner | None, me: Owner) -> None:
    """StoreError when the session was taken from this runner (before a run is stored)."""
    if not holds(me, holder):
        who = holder.describe() if holder else "nobody"
        raise StoreError(f"session {session} is no longer this runner's (held by {who}); "
                         "stopped without storing the run in flight")
