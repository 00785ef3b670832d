"""The protocol's conformance scenarios, each run by ``cairnq.conformance`` on the driver."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from .._clock import Clock
from ..backends import Backend
from ..conformance import VIAS, BackendFactory, Via, load_scenarios, run_scenario
from .driver import Driver

__all__ = ["scenario_dir", "scenario_files", "test_scenario_passes"]


def scenario_dir() -> Path:
    """The scenarios shipped with the suite (``cairnq/drivertest/scenarios/*.json``)."""
    return Path(str(resources.files("cairnq") / "drivertest" / "scenarios"))


def scenario_files() -> list[Path]:
    """Every scenario file, sorted by name."""
    return sorted(scenario_dir().glob("*.json"))


def factory(driver: Driver) -> BackendFactory:
    """Backends for ``run_scenario`` on the driver's database (one scenario per test)."""

    @contextlib.contextmanager
    def opened(clock: Clock | None) -> Iterator[Backend]:
        backend = driver.open(clock=clock)
        try:
            yield backend
        finally:
            backend.close()

    return opened


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario_passes(driver: Driver, path: Path, via: Via) -> None:
    [(_, scenario)] = load_scenarios([path])
    result = run_scenario(scenario, factory(driver), path=str(path), via=via)
    assert [result.detail] == [""]
    assert result.passed
