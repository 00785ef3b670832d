"""The worker's background parts, each as a ``Component`` its ``Lifecycle`` drives.

A run's components, in start order (``Worker._components``; stopped in reverse):
first its extensions' (``cairnq.extensions.for_worker``: the built-ins, its
client's and those given to ``Worker(extensions=...)``), then the kernel's own:

- ``limits``: prepare stores the declared limits, and refuses the start on a
  database without the limits tables (``SchemaIncomplete``); the job reloads
  the stored limits once a second.
- ``pauses``: prepare reads the pauses once (a failure is reported and the
  worker starts with nothing paused); the job reads them again every 500 ms.
- ``presence``: prepare writes the worker's row in the background (a database
  without ``cairnq_workers``: one line, then nothing); the job refreshes it and
  ``close`` deletes it. Stops after the drain.
- ``workflows``: prepare reads whether the workflow tables exist and a task is
  parked; the jobs look for a parked task once a second (the settlements'
  ``in_use`` gate) and sweep under their named lease; under ``until_idle`` it
  sweeps once more before the worker stops (``before_idle``).
- ``batches``: prepare reads whether the batch tables exist and a batch is not
  done; the jobs look again once a second and sweep under their named lease;
  under ``until_idle`` it looks and sweeps once more before the worker stops.
- ``schedules`` (unless ``Schedules(evaluate=False)``): prepare stores the declared
  schedules (their tables missing: one line, no job); the job evaluates under
  its named lease.
- ``history``: prepare reads whether the attempt history's table exists (one
  line if not). No job.
- ``ledger``: prepare reads the migration ledger (which extensions are ready:
  the hooks of one that is not stay out of claims and settlements) and says in
  one line which step aside; the job reads it again every 30 s.
- ``heartbeat``: the job renews the leases of calls in flight. Stops after the
  drain, so draining calls keep their leases.
- ``recovery``: the job recovers expired leases; a stop cancels a recovery in
  progress.
- ``retention`` (with a ``Retention`` only): the job sweeps under its named lease.
"""

from __future__ import annotations

from ..extensions import Part
from ..extensions._base import Job


class JobComponent(Part):
    """A part that is only a job (the heartbeater, the recoverer, the retention sweeper)."""

    def __init__(self, name: str, job: Job, *, stops_after_drain: bool = False) -> None:
        self.name = name
        self.job = job
        self.stops_after_drain = stops_after_drain
