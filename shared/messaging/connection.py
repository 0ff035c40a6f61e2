"""NATS connections for services: FastStream brokers over the client's connect policy (engram_client.connection),
and NATS's transient failures as retryable errors."""
import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from nats import errors as nats_errors
from nats.aio.client import Client
from nats.js import errors as js_errors

from engram_client.connection import (
    FIRST_CONNECT_RETRY_S,
    FIRST_CONNECT_TIMEOUT_S,
    check_listening,
    choose_server,
    server_urls,
)
from engram_client.errors import Timeout, Unavailable
from engram_client.security import ANONYMOUS, NatsSecurity
from shared.messaging.security import broker_options

if TYPE_CHECKING:
    from faststream.nats import NatsBroker

log = logging.getLogger("engram.nats")


def server_info(nc: Client) -> dict[str, Any]:
    """The INFO the connected server sent (its name, its cluster and the cluster's client URLs); nats-py keeps it
    without a public accessor."""
    info: dict[str, Any] = nc._server_info
    return info


async def stop_broker(broker: "NatsBroker") -> None:
    """Stop a broker's subscribers and close its connection; one already closed (the server gone, or the process
    being torn down after a failure) is no error at this point."""
    try:
        await broker.stop()
    except (ExceptionGroup, OSError, nats_errors.Error) as exc:
        log.debug("stopping the broker: %s", exc)


# What NATS raises while the server is away or slow: a later attempt may succeed.
_TRANSIENT = (nats_errors.NoRespondersError, nats_errors.ConnectionClosedError,
              nats_errors.ConnectionReconnectingError, nats_errors.ConnectionDrainingError,
              nats_errors.OutboundBufferLimitError, nats_errors.StaleConnectionError,
              js_errors.ServiceUnavailableError, js_errors.ServerError, js_errors.NoStreamResponseError)


@contextlib.contextmanager
def transient(what: str) -> Iterator[None]:
    """Turn NATS's "not now" failures into Timeout or Unavailable, which callers retry, naming what failed.

    Everything else (a bad request, a bug) passes through unchanged.
    """
    try:
        yield
    except (nats_errors.TimeoutError, TimeoutError) as exc:
        raise Timeout(f"{what} timed out") from exc
    except _TRANSIENT as exc:
        raise Unavailable(f"{what} failed: NATS is unavailable ({type(exc).__name__})") from exc


async def open_broker(url: str, name: str, security: NatsSecurity = ANONYMOUS) -> tuple["NatsBroker", Client]:
    """A FastStream broker connected to NATS at `url` (reconnecting forever with backoff), and its connection.

    FastStream's access log goes at DEBUG through the service's own logging: every handled request already gets
    engram's one line.

    Raises:
        Unavailable: NATS cannot be reached within FIRST_CONNECT_TIMEOUT_S.
    """
    from faststream.nats import NatsBroker

    broker = NatsBroker(server_urls(url), name=name, max_reconnect_attempts=-1, connect_timeout=2,
                        reconnect_time_wait=FIRST_CONNECT_RETRY_S, reconnect_to_server_handler=choose_server,
                        log_level=logging.DEBUG, logger=logging.getLogger("faststream"), **broker_options(security))
    try:
        await check_listening(url)
        nc = await asyncio.wait_for(broker.connect(), FIRST_CONNECT_TIMEOUT_S)
    except Unavailable:
        await broker.stop()
        raise
    except Exception as exc:
        await broker.stop()
        raise Unavailable(f"cannot connect to NATS at {url} ({exc or type(exc).__name__}); is it running?") from exc
    return broker, nc
