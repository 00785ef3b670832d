"""What the attempt history shows above the worker and the client: its part of the
dashboard's task page (``pages``) and of ``cairnq get`` (``cli``).

These modules build on the dashboard and the command line, so nothing below them
imports them: those import them by the names the extension declares
(``History.pages``, ``History.cli``).
"""
