"""The worker's handler context and its executor name no feature: each extension adds
its context methods from its own package (``extensions/<name>/_context_async.py``, composed
in ``extensions/_builtins_context_async.py``, their blocking twins generated) and declares
the handler signals it settles (``Extension.signals``)."""

from __future__ import annotations

from collections import Counter

import pytest

from .test_kernel_names import SRC, mentions

NEUTRAL = (
    "worker/_context.py",
    "worker/_context_async.py",
    "worker/_context_sync.py",
    "worker/_blocking.py",
    "worker/_executor.py",
)


@pytest.mark.parametrize("module", NEUTRAL)
def test_the_worker_s_context_and_executor_name_no_feature(module: str) -> None:
    assert mentions((SRC / module).read_text()) == Counter()


def test_the_scan_would_see_a_feature_signal_named_in_the_executor() -> None:
    source = "try:\n    run()\nexcept Gathering:\n    pass\nexcept Snooze as s:\n    pass\n"
    assert mentions(source) == Counter({"workflows": 1, "snooze": 1})
