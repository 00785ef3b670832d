"""What the pauses show above the worker and the client: the ``cairnq pause``, ``resume``
and ``paused`` commands (``cli``) and the dashboard's pause and resume buttons
(``pages``).

These modules build on the client, the CLI and the dashboard, so nothing below them
imports them: the CLI and the dashboard import them by the names the extension
declares (``Pauses.cli``, ``Pauses.pages``).
"""
