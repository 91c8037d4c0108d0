"""A fleet: many lab machines running queued experiments into one PostgreSQL store.

``perfab submit SPEC... --db URL --machines CLASS`` queues experiments;
``perfab worker --db URL --machine-class CLASS [--machine NAME]`` on each
lab machine takes them one at a time and runs each with the normal runner.
The queue is procrastinate's (``perfab.fleet.app``), on the same database
as the results (``perfab.store.postgres``):

1. ``queues``: one queue per machine class, one per machine, a lock per
   experiment;
2. ``worker``: a lock per machine, heartbeats, stalled jobs put back;
3. ``job``: where a job runs (an experiment's runs all come from one
   machine) and running it;
4. ``machines``: which machine ran a session; a dataset split by machine.
"""

from perfab.fleet.machines import Machine, by_machine, machine_of

__all__ = ["Machine", "by_machine", "machine_of"]
