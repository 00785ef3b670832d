"""What the schedules show above the worker and the client: the ``cairnq schedules``
commands (``cli``) and the dashboard's schedules pages (``pages``).

These modules build on the client, the CLI and the dashboard, so nothing below them
imports them: the CLI and the dashboard import them by the names the extension
declares (``Schedules.cli``, ``Schedules.pages``).
"""
