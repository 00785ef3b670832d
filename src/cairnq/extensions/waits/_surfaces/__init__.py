"""What durable waits show above the worker and the client: ``cairnq send`` and the
task's waits in ``cairnq get`` (``cli``).

This module builds on the command line, so nothing below it imports it: the command
line imports it by the name the extension declares (``Waits.cli``).
"""
