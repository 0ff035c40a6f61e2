"""Publishing engram's events on `<prefix>.<tenant>.events.<kind>` (core NATS, fire-and-forget)."""
from nats.aio.client import Client

from shared import subjects
from shared.contract import Event


async def publish(nc: Client, prefix: str, tenant: str, event: Event) -> None:
    """Publish one event to its tenant's subject."""
    await nc.publish(subjects.events(prefix, tenant, event.kind), event.model_dump_json().encode())
