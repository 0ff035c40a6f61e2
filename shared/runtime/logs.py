"""One logging style for every service: key=value lines, and one canonical line per handled message."""
import logging
import time

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    """Time, level, logger and message, then the record's extra fields as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line."""
        line = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        return line + "".join(f" {k}={v}" for k, v in extras.items())


def configure(level: str) -> None:
    """Send every logger's records to stderr as key=value lines at `level` (libraries' chatter at WARNING)."""
    handler = logging.StreamHandler()
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    for noisy in ("faststream", "nats", "uvicorn", "httpx"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


def handled(log: logging.Logger, *, service: str, tenant: str, subject: str, outcome: str, started: float) -> None:
    """The one INFO line every handled message gets (never its text): who, what, how it ended, how long."""
    log.info("handled", extra={"service": service, "tenant": tenant, "subject": subject, "outcome": outcome,
                               "duration_ms": round((time.perf_counter() - started) * 1e3, 2)})
