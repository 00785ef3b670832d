"""The peers' own virtual environment: ``<root>/.bench-peers/``, never cairnq's.

PgQueuer and huey are measured beside cairnq but are no dependencies of it: they
are installed here, pinned, into a venv made with the same Python
(``python -m venv``), and the peer scripts (``benchmarks/peers/*_bench.py``) run
with that venv's python.  An existing venv is reused when every pinned version
is already installed in it.

Run alone, ``python -m benchmarks.peers.setup`` prints the venv's python path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: Exact versions installed into the peer venv.
#:
#: * pgqueuer 1.6.0 (the 1.6 release named by the task); it talks to
#:   PostgreSQL through asyncpg (its ``asyncpg`` extra, and the driver its
#:   README's examples and ``pgq`` CLI use first).
#: * typer 0.28.0: pgqueuer's CLI (``pgq run``, how its README starts workers)
#:   needs ``typer>=0.15.1``, but typer 0.29 breaks pgqueuer 1.6.0's ``run``
#:   command (its ``--log-level`` default reaches the code as a str:
#:   ``AttributeError: 'str' object has no attribute 'name'``); 0.28.0 is the
#:   newest that works.
#: * huey 3.5.4, the current release, which provides ``SqliteHuey``.
PINS: dict[str, str] = {
    "pgqueuer": "1.6.0",
    "asyncpg": "0.32.0",
    "typer": "0.28.0",
    "huey": "3.5.4",
}

VENV_DIR = ".bench-peers"

_PROBE = """
import json, sys
from importlib import metadata
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        found[name] = None
print(json.dumps({"python": list(sys.version_info[:3]), "versions": found}))
"""


def venv_python(root: Path) -> Path:
    return Path(root) / VENV_DIR / "bin" / "python"


def installed_versions(python: Path) -> dict[str, str | None] | None:
    """The pinned distributions' versions in the venv, or None if it is unusable
    or was made with another Python."""
    if not python.exists():
        return None
    try:
        out = subprocess.run(
            [str(python), "-c", _PROBE, *PINS],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    probe = json.loads(out)
    if probe["python"] != list(sys.version_info[:3]):
        return None
    return probe["versions"]


def ensure_venv(root: Path) -> Path:
    """Create (or reuse) ``<root>/.bench-peers`` with the pinned peers; return its python."""
    root = Path(root)
    python = venv_python(root)
    found = installed_versions(python)
    if found == PINS:
        return python
    if found is None:
        # Missing, broken, or made by another Python: build it anew.
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(root / VENV_DIR)],
            check=True,
            stdout=sys.stderr,
        )
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *(f"{name}=={version}" for name, version in PINS.items()),
        ],
        check=True,
        stdout=sys.stderr,
    )
    found = installed_versions(python)
    if found != PINS:
        raise RuntimeError(f"peer venv has {found}, expected {PINS}")
    return python


if __name__ == "__main__":
    print(ensure_venv(Path(__file__).resolve().parents[2]))
