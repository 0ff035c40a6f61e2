"""Publishing engram's events on `<prefix>.<tenant>.events.<kind>` (core NATS; at least once, with a stable id)."""
from collections.abc import Awaitable, Callable

from nats.aio.client import Client

from engram_client import subjects
from engram_client.contract import Event

Publish = Callable[[str, Event], Awaitable[None]]  # (tenant, event)


def publisher(nc: Client, prefix: str) -> Publish:
    """A function that publishes an event to its tenant's subject over `nc`."""

    async def publish(tenant: str, event: Event) -> None:
        await nc.publish(subjects.events(prefix, tenant, event.kind), event.model_dump_json().encode())

    return publish
