"""Imported first by the package: pytest then rewrites the suite's asserts to show values."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "cairnq.drivertest.parity",
    "cairnq.drivertest.conformance",
    "cairnq.drivertest.state_machine",
    "cairnq.drivertest.transitions",
)
