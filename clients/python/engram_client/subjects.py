"""Every NATS subject engram uses; one function serves both the pattern and the address."""
from engram_client.contract.events import EventKind

WILDCARD = "{tenant}"


def _subject(prefix: str, tenant: str | None, *rest: str) -> str:
    return ".".join((prefix, tenant if tenant is not None else WILDCARD, *rest))


TURNS_DUPLICATE_WINDOW_S = 120.0  # a turn sent again within this long of its first send is stored once (Nats-Msg-Id)


def turns(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.turns`: chat turns (JetStream)."""
    return _subject(prefix, tenant, "turns")


def flush(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.flush`: close a conversation's window (JetStream, same stream as turns)."""
    return _subject(prefix, tenant, "flush")


def recall(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.recall`: request-reply recall."""
    return _subject(prefix, tenant, "recall")


def entries(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.entries`: request-reply admin access to entries."""
    return _subject(prefix, tenant, "entries")


def forget(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.forget`: request-reply, delete a user's, a conversation's or some entries' data."""
    return _subject(prefix, tenant, "forget")


def consolidate(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.consolidate`: request-reply, run the consolidation jobs now."""
    return _subject(prefix, tenant, "consolidate")


def export(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.export`: request-reply, a page of everything engram holds about the tenant or one user."""
    return _subject(prefix, tenant, "export")


def import_(prefix: str, tenant: str | None = None) -> str:
    """`<prefix>.<tenant>.import`: request-reply, load a batch of an export file into the tenant. Operators only: no
    tenant's NATS account imports it (shared/tenancy/accounts.py)."""
    return _subject(prefix, tenant, "import")


def events(prefix: str, tenant: str | None = None, kind: EventKind | None = None) -> str:
    """`<prefix>.<tenant>.events.<kind>`; with kind None, the `>` wildcard of all kinds."""
    return _subject(prefix, tenant, "events", kind or ">")


def dlq(prefix: str, tenant: str | None = None, service: str | None = None) -> str:
    """`<prefix>.dlq.<tenant>.<service>`: dead-lettered messages with the reason in headers.

    The service token keeps these subjects apart from `<prefix>.<tenant>.turns`: a stream capturing
    `<prefix>.dlq.*` would overlap the turns stream (`mem.dlq.turns`), which NATS refuses. Read a tenant's dead
    letters from `<prefix>.dlq.<tenant>.>`.
    """
    return ".".join((prefix, "dlq", tenant if tenant is not None else WILDCARD, service or ">"))


def rebuild(prefix: str) -> str:
    """`_ENGRAM.<prefix>.rebuild`: request-reply, an operator's `engram rebuild`. Outside `<prefix>.>`, so no
    product's permissions (`<prefix>.<tenant>.>`) can reach it."""
    return f"_ENGRAM.{prefix}.rebuild"


def forgotten(prefix: str) -> str:
    """`_ENGRAM.<prefix>.forgotten`: core NATS, every consolidator announces the forgets it answered (a rebuild
    running on any replica applies them to its new build)."""
    return f"_ENGRAM.{prefix}.forgotten"


def tenant_streams(prefix: str) -> str:
    """`_ENGRAM.<prefix>.tenant-streams`: core NATS, an ingestor announces a tenant whose turns stream it just made
    (every replica starts consuming it)."""
    return f"_ENGRAM.{prefix}.tenant-streams"


def kv_key(bucket: str, key: str) -> str:
    """`$KV.<bucket>.<key>`: the subject a key-value entry is stored under (for writes KeyValue has no call for)."""
    return f"$KV.{bucket}.{key}"


def parse(subject: str) -> tuple[str, str]:
    """(tenant, kind) of a `<prefix>.<tenant>.<kind>` subject; ("unknown", "") for any other shape."""
    parts = subject.split(".")
    if len(parts) != 3 or not parts[1]:
        return "unknown", ""
    return parts[1], parts[2]


def nats_wildcard(pattern: str) -> str:
    """A FastStream-style pattern (`mem.{tenant}.turns`) as a plain NATS wildcard (`mem.*.turns`)."""
    return pattern.replace(WILDCARD, "*")
