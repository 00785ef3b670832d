"""The extensions outside cairnq the command line loads: every one the installed
packages declare in the ``cairnq.extensions`` entry-point group, and each
``--extension MODULE:ATTR`` given (a class, or an instance, of ``Extension``).

They are loaded before the command line is parsed: their ``cli`` modules add
commands, their folders join the process's statements and migrations (so
``cairnq migrate`` applies their migrations) and ``cairnq dashboard`` shows their
pages.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import import_module, metadata

from ..extensions import Extension, install
from ._errors import CommandError

GROUP = "cairnq.extensions"
OPTION = "--extension"


def add_option(parser: argparse.ArgumentParser, *, default: object) -> None:
    """The ``--extension`` option (read before parsing, by ``requested``)."""
    parser.add_argument(
        OPTION,
        metavar="MODULE:ATTR",
        action="append",
        dest="extension_specs",
        default=default,
        help=f"load this extension too (besides the {GROUP} entry points); repeatable",
    )


def requested(argv: Sequence[str]) -> list[str]:
    """The values of every ``--extension`` in ``argv``, in order."""
    found = []
    for position, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == OPTION and position + 1 < len(argv):
            found.append(argv[position + 1])
        elif arg.startswith(OPTION + "="):
            found.append(arg[len(OPTION) + 1 :])
    return found


def _extension(target: object, where: str) -> Extension:
    extension = target() if isinstance(target, type) else target
    if not isinstance(extension, Extension):
        raise CommandError(f"{where} is not a cairnq Extension (class or instance)")
    return extension


def load(spec: str) -> Extension:
    """The extension ``MODULE:ATTR`` names.

    Raises:
        CommandError: ``spec`` is malformed, does not import, or is no extension.
    """
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise CommandError(f"{OPTION} takes MODULE:ATTR, not {spec!r}")
    try:
        target = getattr(import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise CommandError(f"{OPTION} {spec}: {exc}") from None
    return _extension(target, spec)


def entry_points() -> list[Extension]:
    """The extensions the installed packages declare in the ``cairnq.extensions`` group."""
    found = []
    for point in metadata.entry_points(group=GROUP):
        try:
            target = point.load()
        except (ImportError, AttributeError) as exc:
            raise CommandError(f"entry point {point.name} ({point.value}): {exc}") from None
        found.append(_extension(target, f"entry point {point.name} ({point.value})"))
    return found


def loaded(argv: Sequence[str]) -> list[Extension]:
    """The extensions the entry points and ``argv``'s ``--extension`` name, installed
    (``cairnq.extensions.install``); one named twice counts once.

    Raises:
        CommandError: one cannot be loaded.
        InvalidExtension: one breaks the rules.
    """
    extensions: dict[str, Extension] = {}
    for extension in (*entry_points(), *(load(spec) for spec in requested(argv))):
        extensions.setdefault(extension.name, extension)
    return install(list(extensions.values()))
