"""The store layer: the protocol's operations one by one, as the reference SDK exposes them.

``TaskStore`` (``cairnq.store.base``) runs each operation over a cairnq
``Backend``; ``SQLiteStore`` (``cairnq.store.sqlite``) and ``PostgresStore``
(``cairnq.store.postgres``) make that backend from a path or a PostgreSQL source,
and ``CairnQ.store`` is the store over a client's backend. The method names,
keyword-only signatures and return shapes are the reference SDK's (protocol
section 5.11), so code that drives its store directly runs on cairnq unchanged;
``CairnQ(store)``, ``Worker(store, queues)`` and ``RetentionSweeper(store, ...)``
take a store as well.

The client, the worker, ``wait`` and the retention sweeper go through the store
object where the reference's do: a method replaced on a store instance
(``store.get = my_get``) or overridden by a subclass of ``TaskStore`` is called
by them in place of their own path:

- ``get``: the client's ``get`` and ``wait``'s read of the finished task;
- ``queue_depth``: the backpressure gate's probe of a full queue's headroom
  (the client's ``queue_depth`` too);
- ``task_done_wake``: ``wait``'s sleep between looks at the task, and
  ``wait_by_key``'s on the task the key pointed at on its last look (while the
  key points at no task, that sleep is the client's own); the key may move to
  another task during a sleep (``conflict="replace"``), which then lasts at most
  its poll interval before the next look follows the key;
- ``purge``: the client's ``purge`` and the retention sweeper's batches (a
  client's ``retention=``, a worker's ``retention=``, ``RetentionSweeper(store, ...)``);
- ``complete``: the worker's settlement of a handler that returned, and a
  handler's own ``ctx.succeed(...)`` / ``ctx.complete(...)``, each fenced on the
  attempt's lease;
- ``claim_session``: the worker's claim (its draws still go through the kernel
  claim with the worker's extension points, so limits and the ownership fence
  hold whichever path a worker's claim takes).

Limits (``extensions.Limits``) and the other claim hooks of extensions apply to
workers' claims only. A direct ``store.claim(...)`` or ``store.claim_session(...)``
that no worker makes claims as the protocol's ``claim`` does, with no limit: an
extension's claim hooks are made for one worker run (``Extension.hooks(worker)``)
and live with it (the limits' book of stored limits, reloaded by a job of that
run; a rate limit's tokens; the draw claimers that refuse rows the worker then
fails), and a store has no run to hold them. Claim through a worker to have
limits hold.

``replaced(store, name)`` is the check. Where nothing is replaced, the client
and the worker keep their own paths (the worker's batched claim and grouped
settlement, the client's group commit), and the store costs them nothing. The
store's ``submit`` runs the submit hooks of the client it belongs to
(``cq.add_submit_hook``), so a task submitted through ``cq.store`` is traced as
one submitted through ``cq``. The blocking ``SyncCairnQ`` calls no replaced
store method (the store's methods are coroutines).

Owned writes (``heartbeat``, ``progress``, ``complete``, ``succeed``, ``fail``)
are fenced on the worker id, as in the reference, and also on the attempt of the
claim. The store's own claims write the worker id alone, as the reference's do
(so the row holds exactly the id given); a worker's claim made through a
replaced ``claim_session`` writes the worker id with the claim's nonce, and the
store's writes for it are fenced on that value (cairnq's fence against a stale
handler writing into a later claim under the same worker id).
``cairnq.store._leases`` says how the store knows the lease. A task held by
another worker id raises ``LostLease``.

A write that ends a task or an attempt (``complete``, ``succeed``, ``fail``,
``complete_in``, ``cancel``, ``cancel_by_key``, and the cancel of a
``conflict="replace"`` submit) runs, in its transaction, the ending hooks of the
store's extensions (cairnq's own and those given, ``extensions.Endings``) that are
ready on the database, as cairnq's worker and client do: with the workflow tables
it decides the task's parked dependents (a dependent released is due once the
write returns, and a success is recorded for a dependent still waiting on others,
so a purge cannot undo it); with the attempt history's table a settlement records
the attempt. Where no extension is ready these writes are the protocol's
statements alone.

A store made from a path or a DSN that was closed raises ``StoreClosed`` rather
than reopening (the reference reopens on the next call).

Example::

    from cairnq import SQLiteStore

    store = SQLiteStore("tasks.db")
    await store.connect()
    await store.submit(name="email.send", payload={"to": "ada@example.com"})
    [task] = await store.claim(queues=["default"], worker_id="w1")
    await store.complete(task_id=task.id, worker_id="w1", result={"sent": True})
    await store.close()
"""

from __future__ import annotations

from .base import ClaimDraw, TaskStore, replaced
from .postgres import PostgresStore
from .sqlite import SQLiteStore

__all__ = ["ClaimDraw", "PostgresStore", "SQLiteStore", "TaskStore", "replaced"]
