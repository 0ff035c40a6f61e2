"""The one way a test waits: poll a condition until it holds, with a timeout, never a bare sleep."""
import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")


@overload
async def eventually(probe: Callable[[], Awaitable[T]], check: Callable[[T], bool] = bool,  # type: ignore[overload-overlap]
                     timeout_s: float = 20.0, interval_s: float = 0.1) -> T: ...


@overload
async def eventually(probe: Callable[[], T], check: Callable[[T], bool] = bool, timeout_s: float = 20.0,
                     interval_s: float = 0.1) -> T: ...


async def eventually(probe: Callable[[], object], check: Callable[[object], bool] = bool, timeout_s: float = 20.0,
                     interval_s: float = 0.1) -> object:
    """Poll `probe` until `check` passes on its result, or fail after `timeout_s` with the last result.

    `probe` may be a coroutine function (a request, a query) or a plain one (a value the test's own callback
    fills in, a flag of a running object); its result is awaited when it is awaitable.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        last = probe()
        if inspect.isawaitable(last):
            last = await last
        if check(last):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s; last result: {last!r}"[:2000])
        await asyncio.sleep(interval_s)
