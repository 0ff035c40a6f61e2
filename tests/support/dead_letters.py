"""What a tenant's dead-letter stream (`mem.dlq.<tenant>`) holds."""
import contextlib
from typing import Any

import nats
from nats.errors import TimeoutError as NatsTimeout

from tests.support.polling import eventually


async def dead_letters(nats_url: str, tenant: str, expect: int = 1, timeout_s: float = 15.0) -> list[Any]:
    """The messages dead-lettered for a tenant, once at least `expect` are there (or what arrived within
    `timeout_s`: the callers judge it, and name what is missing)."""
    nc = await nats.connect(nats_url)
    sub = await nc.jetstream().pull_subscribe(f"mem.dlq.{tenant}.>", durable=None)
    found: list[Any] = []

    async def fetch_more() -> int:
        with contextlib.suppress(NatsTimeout, TimeoutError):
            found.extend(await sub.fetch(expect - len(found), timeout=1))
        return len(found)

    try:
        if expect > 0:
            with contextlib.suppress(AssertionError):
                await eventually(fetch_more, lambda n: n >= expect, timeout_s=timeout_s, interval_s=0)
    finally:
        await sub.unsubscribe()
        await nc.close()
    return found


async def dead_letter_count(nats_url: str, tenant: str) -> int:
    """How many messages of a tenant are in the dead-letter stream right now."""
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().stream_info("MEM_DLQ", subjects_filter=f"mem.dlq.{tenant}.>")
    finally:
        await nc.close()
    return sum((info.state.subjects or {}).values())
