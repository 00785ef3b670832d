"""What the extensions add to the command line, through their ``cli`` modules
(``Extension.cli``). Each name is optional:

- ``add_commands(command, parents, formatter, count)``: commands of its own;
- ``add_get_options(get)``: options of ``cairnq get`` (its ``argparse`` parser);
- ``get_instead(args, client, task)``: the lines ``cairnq get`` prints instead of the
  task's JSON (for an option of its own), or ``None``;
- ``add_to_get(args, client, task, shown)``: adds its keys to the task's JSON object
  ``shown`` (or replaces some);
- ``add_stats_options(stats)``: options of ``cairnq stats``, and
  ``stats_instead(args, client, out)``: the exit code of printing something else
  instead of the counts (for an option of its own), or ``None``;
- ``add_ls_options(ls)``: options of ``cairnq ls``;
- ``ls_instead(args, client)``: the tasks ``cairnq ls`` lists instead of its own list
  (for an option of its own), or ``None``;
- ``top_section(client, queue=..., now_ms=...)``: its ``cairnq.top.Section`` of a
  frame of ``cairnq top``, or ``None`` (see ``cairnq.top``).

Each is called on cairnq's own extensions first, in order, then on those outside.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import import_module
from types import ModuleType
from typing import Any, TextIO

from ..client import SyncCairnQ
from ..extensions import Extension, builtins
from ..models import Task


def cli_modules(extras: Sequence[Extension] = ()) -> list[ModuleType]:
    """The ``cli`` modules of cairnq's extensions and of ``extras``, in that order."""
    return [import_module(e.cli) for e in (*builtins(), *extras) if e.cli is not None]


def add_get_options(get: argparse.ArgumentParser, extras: Sequence[Extension]) -> None:
    """Each extension's options of ``cairnq get``."""
    for module in cli_modules(extras):
        adder = getattr(module, "add_get_options", None)
        if adder is not None:
            adder(get)


def add_ls_options(ls: argparse.ArgumentParser, extras: Sequence[Extension]) -> None:
    """Each extension's options of ``cairnq ls``."""
    for module in cli_modules(extras):
        adder = getattr(module, "add_ls_options", None)
        if adder is not None:
            adder(ls)


def ls_instead(args: argparse.Namespace, client: SyncCairnQ) -> list[Task] | None:
    """The tasks the first extension lists instead of ``cairnq ls``'s own, or ``None``."""
    for module in cli_modules(getattr(args, "extensions", ())):
        instead = getattr(module, "ls_instead", None)
        found = None if instead is None else instead(args, client)
        if found is not None:
            return list(found)
    return None


def get_output(
    args: argparse.Namespace, client: SyncCairnQ, task: Task
) -> dict[str, Any] | list[str]:
    """What ``cairnq get`` prints of ``task``: the first extension's lines printed instead
    of the JSON, else the task's JSON object with what each extension adds."""
    modules = cli_modules(getattr(args, "extensions", ()))
    for module in modules:
        instead = getattr(module, "get_instead", None)
        lines = None if instead is None else instead(args, client, task)
        if lines is not None:
            return list(lines)
    shown = task.to_dict()
    for field in ("payload", "result"):  # without the key: "<encrypted, v1, key '...'>"
        shown[field] = client.codec.shown(shown[field], what=field, task_id=task.id)
    for module in modules:
        adder = getattr(module, "add_to_get", None)
        if adder is not None:
            adder(args, client, task, shown)
    return shown


def add_stats_options(stats: argparse.ArgumentParser, extras: Sequence[Extension]) -> None:
    """Each extension's options of ``cairnq stats``."""
    for module in cli_modules(extras):
        adder = getattr(module, "add_stats_options", None)
        if adder is not None:
            adder(stats)


def stats_instead(args: argparse.Namespace, client: SyncCairnQ, out: TextIO) -> int | None:
    """The exit code of the first extension that prints ``cairnq stats`` instead of the
    counts (an option of its own was given), else ``None``."""
    for module in cli_modules(getattr(args, "extensions", ())):
        instead = getattr(module, "stats_instead", None)
        code = None if instead is None else instead(args, client, out)
        if code is not None:
            return int(code)
    return None
