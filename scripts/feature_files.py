"""Which Python files of the package name each built-in feature, inside its package and outside.

    python -m scripts.feature_files            # the table, one line per feature
    python -m scripts.feature_files --list     # and the files outside each feature's package

A file names a feature when one of its identifiers or strings (docstrings aside) holds one
of the feature's ``words`` (its ``Extension.words``), the rule of
``tests/test_kernel_names.py``. A feature's package is ``src/cairnq/extensions/<name>/``;
the registry of built-ins (``REGISTRY``: the list of them, and the composition of their
client parts the clients inherit) names every built-in by design and has a column of its own.
Words are fragments, so a file can be counted for a word used in another sense; the count
is an upper bound to read with ``--list``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.test_kernel_names import mentions

from cairnq.extensions import builtins

SRC = Path(__file__).resolve().parents[1] / "src" / "cairnq"

# The modules that list or compose the built-ins, so name each of them.
REGISTRY = (
    "extensions/_registry.py",
    "extensions/_builtins_client_async.py",
    "extensions/_builtins_client_sync.py",
)


def naming_files() -> dict[str, list[str]]:
    """{feature: sorted paths (relative to the package) of the files that name it}."""
    found: dict[str, list[str]] = {ext.name: [] for ext in builtins()}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        for feature in mentions(path.read_text()):
            found[feature].append(relative)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name the files outside")
    args = parser.parse_args(argv)
    print(f"{'feature':<10} {'files':>5} {'inside':>6} {'registry':>8} {'outside':>7}")
    for feature, files in naming_files().items():
        inside = [f for f in files if f.startswith(f"extensions/{feature}/")]
        registry = [f for f in files if f in REGISTRY]
        outside = [f for f in files if f not in inside and f not in registry]
        print(
            f"{feature:<10} {len(files):>5} {len(inside):>6} {len(registry):>8} {len(outside):>7}"
        )
        if args.list:
            for name in outside:
                print(f"    {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
