"""What snoozing shows above the worker and the client: its line in the Details of
the dashboard's task page (``pages``) and its part of ``cairnq get`` (``cli``).

These modules build on the dashboard and the command line, so nothing below them
imports them: those import them by the names the extension declares
(``Snoozing.pages``, ``Snoozing.cli``).
"""
