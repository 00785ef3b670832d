"""The kernel: tasks, keys, claims, settlements, heartbeats, recovery, purge and the ledger.

Every operation is a statement-yielding generator, on the protocol's own tables.
Nothing here does IO. Each function validates its inputs eagerly (so bad input
raises before a transaction opens), then returns a generator the backend drives
(see ``protocol.steps``). The generator decides every branch of the protocol: key
conflicts, recover-then-claim, cancel wins, ownership checks that turn zero rows
into ``LostLease``. No feature is named here: a feature plugs in through the hooks
of ``kernel.points`` (``Points``).

``submit``, ``claim``, ``settle``, ``admin``, ``reads`` and ``ledger`` hold the
operations; this module hands on their public names, which callers use. An
extension uses only these (and the public modules ``points``, ``periodic``,
``procedures``, ``ledger``, ``views``), never a ``_`` name: for its own writes
fenced on an attempt, ``owned`` and ``owned_row``; for a task it adds, claims,
ends or holds back inside its own operation, ``insert``, ``submit_first``,
``claim_ids``, ``cancel_rows``, ``fail_queued``, ``defer``, ``undefer`` and
``hand_back``; ``list_tasks`` and the reads.
"""

from __future__ import annotations

from ..backends import Opening, register_opening
from .admin import cancel as cancel
from .admin import cancel_by_key as cancel_by_key
from .admin import cancel_rows as cancel_rows
from .admin import defer as defer
from .admin import fail_queued as fail_queued
from .admin import lock_acquire as lock_acquire
from .admin import lock_release as lock_release
from .admin import purge as purge
from .admin import purge_counts as purge_counts
from .admin import purge_exclusive as purge_exclusive
from .admin import retry as retry
from .admin import retry_by_key as retry_by_key
from .admin import undefer as undefer
from .claim import LEASE_EXPIRED_ERROR as LEASE_EXPIRED_ERROR
from .claim import Draw as Draw
from .claim import claim as claim
from .claim import claim_draw as claim_draw
from .claim import claim_ids as claim_ids
from .claim import claimant as claimant
from .claim import expired_leases_exist as expired_leases_exist
from .claim import probe as probe
from .claim import recover as recover
from .ledger import NAMED_LEASES_MIGRATION as NAMED_LEASES_MIGRATION
from .ledger import PROTOCOL_VERSION as PROTOCOL_VERSION
from .ledger import applied_migrations as applied_migrations
from .ledger import apply_migration as apply_migration
from .ledger import check_installation as check_installation
from .ledger import check_protocol_version as check_protocol_version
from .ledger import named_leases_ready as named_leases_ready
from .ledger import protocol_version as protocol_version
from .points import NO_POINTS as NO_POINTS
from .points import AttemptEnd as AttemptEnd
from .points import DrawClaimer as DrawClaimer
from .points import Points as Points
from .points import TaskEnd as TaskEnd
from .points import TaskEndFor as TaskEndFor
from .points import claiming_with as claiming_with
from .points import ending_with as ending_with
from .reads import get as get
from .reads import get_by_key as get_by_key
from .reads import get_status as get_status
from .reads import get_status_by_key as get_status_by_key
from .reads import list_tasks as list_tasks
from .reads import queue_depth as queue_depth
from .reads import stats as stats
from .settle import Beat as Beat
from .settle import cancel_requested as cancel_requested
from .settle import complete as complete
from .settle import complete_held as complete_held
from .settle import complete_many as complete_many
from .settle import fail as fail
from .settle import hand_back as hand_back
from .settle import heartbeat as heartbeat
from .settle import heartbeat_batch as heartbeat_batch
from .settle import hold as hold
from .settle import owned as owned
from .settle import owned_row as owned_row
from .settle import progress as progress
from .settle import release as release
from .settle import succeed as succeed
from .setup import setup_steps
from .submit import Decision as Decision
from .submit import NewTask as NewTask
from .submit import decide_conflict as decide_conflict
from .submit import insert as insert
from .submit import new_plain_task as new_plain_task
from .submit import new_task as new_task
from .submit import revise_queued as revise_queued
from .submit import submit as submit
from .submit import submit_first as submit_first
from .submit import submit_many as submit_many
from .submit import submit_many_ids as submit_many_ids
from .submit import submit_many_ids_streamed as submit_many_ids_streamed

# Every backend opens a database with the kernel's setup and installation check.
register_opening(Opening(setup=setup_steps, installation_check=check_installation))
