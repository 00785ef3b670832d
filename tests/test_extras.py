"""A feature whose extra is missing says which extra to install, from this project's source."""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCKED = {
    "cairnq.backends.postgres": ("psycopg", "postgres"),
    "cairnq.dashboard": ("starlette", "dashboard"),
    "cairnq.telemetry.metrics": ("prometheus_client", "metrics"),
    "cairnq.telemetry.tracing": ("opentelemetry", "otel"),
}


@pytest.mark.parametrize("module", sorted(BLOCKED))
def test_importing_without_the_extra_names_the_extra_to_install_from_source(module: str) -> None:
    dependency, extra = BLOCKED[module]
    program = (
        f"import sys; sys.modules[{dependency!r}] = None\n"
        f"try:\n    import {module}\n"
        "except ImportError as exc:\n    print(exc)\n"
        "else:\n    print('imported')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert f'pip install ".[{extra}]"' in out
    assert 'install "cairnq' not in out and "install cairnq" not in out
