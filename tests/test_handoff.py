"""A thread blocking on a coroutine it runs on the loop, and the calls handed back to it
(``cairnq._handoff``): what a plain ``def`` handler's context is built on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from cairnq._handoff import in_waiting_thread, run_from_thread

T = TypeVar("T")


def _thread_name() -> str:
    return threading.current_thread().name


async def _from_a_thread(method: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``run_from_thread(method(), loop)``, called in a thread named ``handler``."""
    loop = asyncio.get_running_loop()
    values: list[T] = []
    errors: list[Exception] = []

    def handler() -> None:
        try:
            values.append(run_from_thread(method(), loop))
        except Exception as exc:
            errors.append(exc)

    thread = threading.Thread(target=handler, name="handler")
    thread.start()
    await asyncio.to_thread(thread.join)
    if errors:
        raise errors[0]
    return values[0]


async def test_a_call_handed_back_runs_in_the_waiting_thread_and_its_value_reaches_the_loop() -> (
    None
):
    async def method() -> tuple[str, str]:
        return _thread_name(), await in_waiting_thread(_thread_name)

    on_loop, handed_back = await _from_a_thread(method)

    assert (on_loop, handed_back) == (threading.current_thread().name, "handler")


async def test_an_exception_of_a_call_handed_back_reaches_the_coroutine_and_the_thread() -> None:
    seen: list[str] = []

    def fails() -> None:
        raise KeyError("in the handler's thread")

    async def method() -> None:
        try:
            await in_waiting_thread(fails)
        except KeyError:
            seen.append("coroutine")
            raise

    with pytest.raises(KeyError, match="in the handler's thread"):
        await _from_a_thread(method)
    assert seen == ["coroutine"]


async def test_with_no_thread_waiting_the_call_runs_on_the_loop() -> None:
    assert await in_waiting_thread(_thread_name) == threading.current_thread().name
