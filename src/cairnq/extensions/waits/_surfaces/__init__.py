"""What durable waits show above the worker and the client: ``cairnq send`` and the
task's waits in ``cairnq get`` (``cli``); the task page's Waits card and its send
action (``pages``).

These modules build on the command line and the dashboard, so nothing below them
imports them: those import them by the names the extension declares (``Waits.cli``,
``Waits.pages``).
"""
