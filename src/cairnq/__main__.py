"""``python -m cairnq``: the same as the ``cairnq`` command."""

from .cli import console

console()
