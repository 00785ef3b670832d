"""The surfaces that every feature adds to name no feature: the command line
(``cli/``), ``cairnq top`` and the dashboard. Each extension adds its commands,
its parts of ``cairnq get`` and ``cairnq top`` and its parts of the dashboard's
pages from its own ``_surfaces/`` (``Extension.cli``, ``Extension.pages``).

The scan is ``tests/test_kernel_names.py``'s. A word can name something else:
``scheduled`` is also a queued task not due yet (``cairnq top``'s ``SCHEDULED``
column, the task page's ``scheduled`` line), which the protocol says; those
mentions are listed in ``OTHER_SENSE``, which may only shrink.
"""

from __future__ import annotations

from pathlib import Path

import cairnq

from .test_kernel_names import mentions

SRC = Path(cairnq.__file__).parent

SURFACES = sorted(
    [
        *(p for p in (SRC / "cli").glob("*.py")),
        *(p for p in (SRC / "dashboard").glob("*.py")),
        SRC / "top.py",
    ]
)

# (module, feature) -> mentions of a word in another sense. Only ever lowered.
OTHER_SENSE: dict[tuple[str, str], int] = {
    # The top command's help: queued tasks "not yet due (SCHEDULED)".
    ("cli/__init__.py", "schedules"): 1,
    # The task page's timeline of the row: "scheduled", "retry scheduled".
    ("dashboard/_pages.py", "schedules"): 2,
    # The queue table's SCHEDULED column and ``Frame.scheduled``.
    ("top.py", "schedules"): 4,
}


def surface_mentions() -> dict[tuple[str, str], int]:
    """Every (surface module, feature) named in that module, with its count."""
    table: dict[tuple[str, str], int] = {}
    for path in SURFACES:
        for feature, count in mentions(path.read_text()).items():
            table[(path.relative_to(SRC).as_posix(), feature)] = count
    return table


def test_the_surfaces_name_no_feature_but_a_word_in_another_sense() -> None:
    found = surface_mentions()
    assert found == OTHER_SENSE, (
        "a surface names a feature (or the listed mentions shrank: lower OTHER_SENSE); "
        "add the feature's part from its extension's _surfaces/ instead"
    )


def test_the_scan_reads_every_surface() -> None:
    assert {p.relative_to(SRC).as_posix() for p in SURFACES} >= {
        "cli/__init__.py",
        "cli/_tasks.py",
        "dashboard/_pages.py",
        "dashboard/_view.py",
        "top.py",
    }
