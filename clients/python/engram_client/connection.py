"""NATS connections for clients: a bounded first connect, then reconnecting forever with backoff, buffering at most
`pending_bytes` while away."""
import asyncio
import contextlib
import logging
import random
from typing import Any
from urllib.parse import urlparse

from nats import errors as nats_errors
from nats.aio.client import Client

from engram_client.errors import Unavailable
from engram_client.security import ANONYMOUS, NatsSecurity

log = logging.getLogger("engram.nats")

FIRST_CONNECT_TIMEOUT_S = 10.0
FIRST_CONNECT_RETRY_S = 1  # between attempts at the first connect (nats-py takes whole seconds)
RECONNECT_BASE_S = 0.25
RECONNECT_CAP_S = 8.0
PENDING_BYTES = 8 * 1024 * 1024  # what a client buffers while disconnected; beyond it a publish fails at once


def reconnect_delay_s(attempts: int, base_s: float = RECONNECT_BASE_S, cap_s: float = RECONNECT_CAP_S) -> float:
    """Wait before reconnect attempt `attempts` + 1: doubling from `base_s`, capped, with jitter so that many
    clients of one restarted server do not come back in the same instant."""
    return float(min(cap_s, base_s * 2 ** min(attempts, 30)) * random.uniform(0.5, 1.0))


def choose_server(servers: list[Any], info: dict[str, Any]) -> tuple[Any, float]:
    """nats-py's reconnect hook: a server of the pool (the URL given and the cluster members the servers told of)
    that has failed the fewest attempts, chosen at random among equals, after `reconnect_delay_s` of its attempts.

    Returning no server would make nats-py try the pool's first one every time: with a cluster, a client whose
    first server died would never move to the others.
    """
    if not servers:
        return None, reconnect_delay_s(0)
    fewest = min(int(s.reconnects) for s in servers)
    chosen = random.choice([s for s in servers if int(s.reconnects) == fewest])
    return chosen, reconnect_delay_s(fewest)


def server_urls(url: str) -> list[str]:
    """The servers of a NATS URL, which may list several separated by commas (the members of a cluster)."""
    return [part.strip() for part in url.split(",") if part.strip()]


async def connect(url: str, name: str, *, first_connect_timeout_s: float = FIRST_CONNECT_TIMEOUT_S,
                  pending_bytes: int = PENDING_BYTES, quiet: bool = False,
                  security: NatsSecurity = ANONYMOUS) -> Client:
    """Connect to NATS at `url`, trying for `first_connect_timeout_s`; once connected, never give up reconnecting.

    Args:
        security: the identity, TLS and inbox prefix to connect with (anonymous by default).
        pending_bytes: the most a disconnected connection buffers; a publish beyond it fails instead of growing.
        quiet: log connection trouble at DEBUG (a client library should not be loud), else WARNING.
    """

    await check_listening(url)

    async def on_error(exc: Exception) -> None:
        # nats-py prints a traceback per failed attempt by default; one line is enough.
        log.log(logging.DEBUG if quiet else logging.WARNING, "nats %s: %s", name, exc)

    nc = Client()
    try:
        await asyncio.wait_for(nc.connect(
            servers=server_urls(url), name=name, connect_timeout=2, allow_reconnect=True, max_reconnect_attempts=-1,
            reconnect_time_wait=FIRST_CONNECT_RETRY_S, reconnect_to_server_handler=choose_server,
            pending_size=pending_bytes, error_cb=on_error, **security.client_options()), first_connect_timeout_s)
    except Exception as exc:
        with contextlib.suppress(Exception):
            await nc.close()
        reason = "no answer" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        raise Unavailable(f"cannot connect to NATS at {url} ({reason} within {first_connect_timeout_s:g}s); "
                          "is it running?") from exc
    return nc


async def check_listening(url: str) -> None:
    """Fail at once when nothing accepts TCP connections at the URL's address (at any of them, for a list),
    rather than after the first-connect timeout; anything else (unreachable for now, slow) is left for the NATS
    client's own attempts.

    Raises:
        Unavailable: the connection was refused.
    """
    urls = server_urls(url)
    if len(urls) > 1:
        for one in urls:
            with contextlib.suppress(Unavailable):
                await check_listening(one)
                return
        raise Unavailable(f"cannot connect to NATS at {url}: nothing listens at any of them; is it running?")
    parsed = urlparse(url if "://" in url else f"nats://{url}")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parsed.hostname or "127.0.0.1",
                                                                   parsed.port or 4222), 2)
    except ConnectionRefusedError as exc:
        raise Unavailable(f"cannot connect to NATS at {url}: nothing listens there; is it running?") from exc
    except (OSError, TimeoutError):
        return
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def close(nc: Client) -> None:
    """Send what is buffered, then close; a server that is already gone is no error at this point."""
    with contextlib.suppress(Exception):
        await nc.flush(timeout=2)
    try:
        await nc.close()
    except (OSError, nats_errors.Error) as exc:
        log.debug("closing the NATS connection: %s", exc)
