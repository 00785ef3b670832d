"""The protocol, written once and free of IO.

``statements`` loads the canonical SQL (``sql/``) and the ordered migrations
(``migrations/``) shipped beside these modules; ``steps`` is the vocabulary an
operation speaks to a backend in (the state machine's operations, built on it,
are in ``cairnq.kernel``); ``reads`` are the reads, as generators that yield
statements; ``procedures`` are the multi-step flows built on them (wait, call);
``setup`` brings a database to the current schema. Nothing here opens a
connection: a backend runs the steps.
"""
