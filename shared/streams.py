"""JetStream streams and key-value buckets engram owns, named in one place."""
from shared import subjects


def turns_stream(prefix: str) -> str:
    """Name of the stream carrying turns and flushes (`MEM_TURNS` for the default prefix)."""
    return f"{prefix.upper().replace('-', '_')}_TURNS"


def turns_subjects(prefix: str) -> list[str]:
    """Subjects the turns stream captures: turns and flushes of every tenant, in one order."""
    return [subjects.nats_wildcard(subjects.turns(prefix)), subjects.nats_wildcard(subjects.flush(prefix))]


def dlq_stream(prefix: str) -> str:
    """Name of the dead-letter stream."""
    return f"{prefix.upper().replace('-', '_')}_DLQ"


def dlq_subjects(prefix: str) -> list[str]:
    """Subjects the dead-letter stream captures."""
    return [subjects.nats_wildcard(subjects.dlq(prefix))]
