"""What the limits show above the worker and the client: the ``cairnq limits``
commands (``cli``) and the dashboard's limits page (``pages``).

These modules build on the client, the CLI and the dashboard, so nothing below them
imports them: the CLI and the dashboard import them by the names the extension
declares (``Limits.cli``, ``Limits.pages``).
"""
