"""Imported first by the package: pytest then rewrites the suite's asserts to show values."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "cairnq.drivertest.test_parity",
    "cairnq.drivertest.test_conformance",
    "cairnq.drivertest.test_state_machine",
    "cairnq.drivertest.test_transitions",
)
