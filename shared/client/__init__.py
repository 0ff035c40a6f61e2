"""The client side of the contract: the MemoryClient SDK, and helpers that publish sessions and wait for them."""
from shared.client.sdk import MemoryClient
from shared.client.sessions import publish_sessions, wait_until_stored

__all__ = ["MemoryClient", "publish_sessions", "wait_until_stored"]
