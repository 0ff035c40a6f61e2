"""How Qdrant Edge calls run: on the engine's own bounded threads, its transient failures raised as Unavailable.

The engine's calls cannot be cancelled once running. On asyncio's default pool, an engine that hangs would take a
thread per call until DNS lookups, BM25 encoding and every other `to_thread` of the process wait behind it; on this
pool it holds at most EDGE_THREADS threads, calls queued behind them are cancelled with their caller (a recall at
its deadline), and the rest of the process goes on.
"""
import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from engram_client.errors import Timeout, Unavailable

T = TypeVar("T")

EDGE_THREADS = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default pool size, which these calls used before

# What the engine raises (a bare Exception, its message naming the kind) for a state that passes: the shard closed
# (a shutdown or a rebuild's switch racing the call), cancelled, out of memory, a full or over-quota disk, too many
# open files. Anything else (a wrong vector size, corrupt storage, a bad filter) is a bug or damage that retrying
# cannot mend, and stays an internal error.
_TRANSIENT = ("Shard is not initialized", "Operation cancelled", "Out of memory", "No space left on device",
              "Quota exceeded", "Too many open files")
_TIMEOUT = "Timeout error"

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _threads() -> ThreadPoolExecutor:
    """The process's one pool for engine calls (every EdgeStore shares it; its threads start on demand)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=EDGE_THREADS, thread_name_prefix="qdrant-edge")
        return _pool


async def run(fn: Callable[..., T], *args: Any) -> T:
    """Run one engine call on the engine's threads."""
    return await asyncio.get_running_loop().run_in_executor(_threads(), functools.partial(fn, *args))


def transient(exc: BaseException) -> bool:
    """Whether an engine error names a state that passes (see _TRANSIENT), so that the call is worth retrying."""
    text = str(exc)
    return type(exc) is Exception and (any(marker in text for marker in _TRANSIENT) or text.startswith(_TIMEOUT))


@contextlib.contextmanager
def engine_errors(where: str) -> Iterator[None]:
    """Raise the engine's transient failures as Unavailable (Timeout for its own timeouts), which callers retry."""
    try:
        yield
    except Exception as exc:
        if not transient(exc):
            raise
        if str(exc).startswith(_TIMEOUT):
            raise Timeout(f"the Qdrant Edge shard in {where} timed out: {exc}") from exc
        raise Unavailable(f"the Qdrant Edge shard in {where} cannot serve now: {exc}") from exc
