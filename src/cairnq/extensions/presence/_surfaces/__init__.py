"""What presence shows above the worker and the client: the ``unserved:`` lines of
``cairnq top`` (``cli``) and the dashboard's Workers page, with the overview's workers
tile and unserved notices (``pages``).

These modules build on the client, the CLI and the dashboard, so nothing below them
imports them: the CLI and the dashboard import them by the names the extension
declares (``Presence.cli``, ``Presence.pages``).
"""
