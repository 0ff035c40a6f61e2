"""The one shape of every service: `services/<name>/deps.py` opens what it uses, `services/<name>/app.py` builds it
with `build(settings, deps)`, and the caller starts and stops what that returns."""
from typing import Protocol

from shared.runtime.health import Health


class Service(Protocol):
    """A built service: `start` begins taking work (its loops watched by `health`), `stop` ends it gracefully.
    Its dependencies, opened by the caller, are closed by the caller after `stop`."""

    async def start(self, health: Health) -> None:
        """Begin taking work."""

    async def stop(self) -> None:
        """Stop taking work and finish what was taken."""


class Opened(Protocol):
    """Opened dependencies of a service, whose readiness /readyz reports."""

    async def ready(self) -> str | None:
        """None if the service can work, else why not."""
