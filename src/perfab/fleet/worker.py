"""``perfab worker``: one per lab machine; takes experiments from its class's queue and runs them.

A worker

1. holds its machine's lock (a PostgreSQL advisory lock on the machine
   name, on a connection of its own): a second worker for the same machine
   is refused, and the server releases the lock when the holder's
   connection dies, however it dies;
2. takes one job at a time from ``perfab/CLASS/MACHINE`` (what it began and
   must finish, first) and ``perfab/CLASS``; each job runs one experiment
   with the normal runner and the real executor (``perfab.fleet.job``), so
   two experiments never share the machine;
3. sends a heartbeat every ``stall_s / 4`` seconds, and every ``stall_s / 2``
   seconds puts back into their queue the jobs of its class whose worker
   has sent none for ``stall_s`` seconds (killed, powered off, cut off).
   The job then resumes on its machine when that machine's worker is back.

SIGINT or SIGTERM: the experiment in flight finishes, then the worker
exits.  ``until_idle``: exit when the queues are empty.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
from contextlib import contextmanager
from typing import Callable

from perfab.errors import PerfabError, StoreError
from perfab.fleet.app import check_url, ensure_schema, make_app
from perfab.fleet.job import Context
from perfab.fleet.queues import check_name, class_of, class_queue, machine_queue


class MachineTaken(PerfabError):
    """Another worker serves this machine."""


def serve(url: str, machine_class: str, machine: str | None = None, stall_s: float = 60.0,
          until_idle: bool = False, say: Callable[[str], None] = print) -> None:
    """Run jobs of ``machine_class`` on this machine until stopped (or, with ``until_idle``, until none is left)."""
    check_url(url)
    check_name("machine class", machine_class)
    machine = check_name("machine", machine or socket.gethostname())
    if stall_s <= 0:
        raise PerfabError(f"--stall-after {stall_s}: must be positive (seconds without a heartbeat)")
    with machine_lock(url, machine):
        ensure_schema(url)
        ctx = Context(url, machine, machine_class, say)
        say(f"serving class {machine_class} as machine {machine} (pid {os.getpid()})")
        try:
            asyncio.run(_serve(make_app(url), ctx, stall_s, until_idle))
        except PerfabError:
            raise
        except Exception as e:  # the queue's connection failed (server gone, database dropped)
            from perfab.store.postgres import display, first_line

            raise StoreError(f"{display(url)}: the work queue failed ({first_line(e)}); the job in flight "
                             "is put back when a worker of this class sees it stalled; start the worker "
                             "again when the server is back") from None
    say("stopped")


async def _serve(app, ctx: Context, stall_s: float, until_idle: bool) -> None:
    async with app.open_async():
        sweeper = asyncio.create_task(_sweep(app, ctx, stall_s))
        try:
            await app.run_worker_async(
                queues=[machine_queue(ctx.machine_class, ctx.machine), class_queue(ctx.machine_class)],
                name=f"perfab {ctx.machine}", concurrency=1, wait=not until_idle, delete_jobs="never",
                additional_context={"perfab": ctx}, update_heartbeat_interval=stall_s / 4,
                stalled_worker_timeout=stall_s, fetch_job_polling_interval=min(5.0, stall_s / 2),
                task_middleware=[_log_job(ctx)])
        finally:
            sweeper.cancel()


async def _sweep(app, ctx: Context, stall_s: float) -> None:
    """Put the stalled jobs of this class back into their queues, every ``stall_s / 2`` seconds."""
    while True:
        try:
            stalled = await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stall_s)
        except Exception as e:  # noqa: BLE001 - a lost connection: try again next round
            ctx.say(f"could not look for stalled jobs ({str(e).splitlines()[0][:120]})")
            stalled = []
        for job in stalled:
            if class_of(job.queue) != ctx.machine_class:
                continue
            try:
                await app.job_manager.retry_job(job)
            except Exception:  # noqa: BLE001 - another worker put it back first
                continue
            ctx.say(f"job {job.id} ({job.task_kwargs.get('experiment')}) lost its worker; put back into {job.queue}")
        await asyncio.sleep(stall_s / 2)


def _log_job(ctx: Context):
    """A task middleware: one line when a job starts and one when it ends, however it ends."""
    from perfab.fleet.job import BelongsElsewhere, JobFailed

    def middleware(process_task, context, worker):
        job = context.job
        ctx.say(f"job {job.id}: {job.task_kwargs.get('experiment')} from {job.queue}")
        try:
            outcome = process_task()
        except BelongsElsewhere as e:
            ctx.say(f"job {job.id}: {e}; moved to that machine's queue")
            raise
        except JobFailed as e:
            ctx.say(f"job {job.id} failed: {e}")
            raise
        ctx.say(f"job {job.id}: {outcome}")
        return outcome

    return middleware


@contextmanager
def machine_lock(url: str, machine: str):
    """Hold the advisory lock of ``machine`` on a connection of its own; MachineTaken naming the holder."""
    from perfab.store.postgres import connect, display

    me = f"perfab worker {machine} pid {os.getpid()} on {socket.gethostname()}"
    conn = connect(url, display(url), me)
    try:
        for setting in ("tcp_keepalives_idle = 15", "tcp_keepalives_interval = 5", "tcp_keepalives_count = 3"):
            conn.execute(f"SET {setting}")  # a holder cut off by the network lets go within a minute
        key = int.from_bytes(hashlib.blake2b(f"perfab machine {machine}".encode(), digest_size=8).digest(), "big",
                             signed=True)
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            raise MachineTaken(f"machine {machine} is served by another worker ({_holder(conn, key)}); stop that "
                               "worker first, or name this machine otherwise with --machine NAME")
        yield
    finally:
        conn.close()


def _holder(conn, key: int) -> str:
    row = conn.execute(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = (%s >> 32)::bit(32)::int::oid "
        "AND l.objid = (%s & 4294967295)::bit(32)::int::oid", (key, key)).fetchone()
    return row[0] if row and row[0] else "unknown"
