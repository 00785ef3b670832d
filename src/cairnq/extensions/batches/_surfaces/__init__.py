"""What the batches show above the worker and the client: the ``cairnq batch`` command
(``cli``), which the command line imports by the name the extension declares
(``Batches.cli``)."""
