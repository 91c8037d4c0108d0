"""The work queue: procrastinate on the same PostgreSQL database as the results.

``make_app(url)`` is the procrastinate application with perfab's one task
(``perfab.fleet.job.run_experiment``) registered; ``ensure_schema`` creates
procrastinate's tables (in the schema ``public``; perfab's results are in
``perfab``) when they are absent; ``submit`` queues experiments for a
machine class.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from perfab.errors import UsageError
from perfab.fleet.queues import TASK, check_name, class_queue, experiment_lock
from perfab.store import is_postgres_url

_SCHEMA_LOCK = 0x70657266_61620002  # pg_advisory_lock key while procrastinate's tables are created


@dataclass(frozen=True)
class Queued:
    """One experiment handed to the queue (or found waiting there already)."""

    experiment: str  # experiment name
    job: int | None  # procrastinate job id; None when it was waiting already


def check_url(db: str | None) -> str:
    if not is_postgres_url(db):
        raise UsageError(f"--db {db!r}: a fleet shares one PostgreSQL database; "
                         "pass --db postgresql://user@host/dbname")
    return db


def make_app(url: str):
    """The procrastinate App over ``url`` with perfab's task registered (quiet: perfab's worker logs its own lines)."""
    import procrastinate

    from perfab.fleet.job import Moves, run_experiment

    logging.getLogger("procrastinate").addHandler(logging.NullHandler())
    logging.getLogger("procrastinate").propagate = False
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=4))

    def task(context, spec_text: str, spec_path: str, experiment: str, submission: str) -> str:
        ctx = context.additional_context["perfab"]
        return run_experiment(ctx, spec_text, spec_path, experiment, submission)

    app.task(name=TASK, pass_context=True, retry=Moves())(task)
    return app


def ensure_schema(url: str) -> None:
    """Create procrastinate's tables when this database has none yet (once, however many start together)."""
    from perfab.store.postgres import connect, display, schema_version

    conn = connect(url, display(url), "perfab queue setup")
    try:
        schema_version(conn.execute, display(url))  # another application's, or a newer perfab's: nothing written
        conn.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK,))
        if conn.execute("SELECT to_regclass('public.procrastinate_jobs')").fetchone()[0] is None:
            from procrastinate.schema import SchemaManager

            conn.execute("SET search_path TO public")
            conn.execute(SchemaManager.get_schema())
    finally:
        conn.close()


def submit(url: str, specs: list[str | Path], machine_class: str, say: Callable[[str], None]) -> list[Queued]:
    """Queue each spec for a machine of ``machine_class``; every spec is read and checked before any is queued."""
    from procrastinate import exceptions

    from perfab.specfile import load_spec

    check_url(url)
    check_name("machine class", machine_class)
    experiments = [load_spec(p) for p in specs]
    ensure_schema(url)
    app = make_app(url)
    out = []
    with app.open():
        for exp in experiments:
            lock = experiment_lock(exp.name)
            deferrer = app.tasks[TASK].configure(queue=class_queue(machine_class), lock=lock, queueing_lock=lock)
            try:
                job = deferrer.defer(spec_text=exp.source, spec_path=str(exp.path), experiment=exp.name,
                                     submission=_submission(exp.source))
            except exceptions.AlreadyEnqueued:
                say(f"{exp.name}: already waiting in the queue; not queued again")
                out.append(Queued(exp.name, None))
                continue
            say(f"{exp.name}: queued as job {job} for machines of class {machine_class}")
            out.append(Queued(exp.name, job))
    return out


def _submission(spec_text: str) -> str:
    """A name for this submission: unique, and showing which spec text it carries."""
    return f"{hashlib.sha256(spec_text.encode()).hexdigest()[:12]}-{uuid.uuid4().hex[:12]}"
