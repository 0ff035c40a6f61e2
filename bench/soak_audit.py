"""The soak's exactly-once accounting: every published turn against what the store holds once engram has stopped.

A turn that was published and not forgotten must be a source of exactly one *active* episode (kind `episodic`,
neither merged into another nor superseded): merge keeps every source turn in the kept entry (the union), so
merged-away entries are not counted. A turn whose only episode retention removed (low score, TTL, per-user cap;
seen as `entries_forgotten` events with that reason) is *faded*: counted apart, neither lost nor stored. A turn
of a user or conversation the soak asked engram to forget must appear in no entry at all, of any kind, active or
not (as a source turn id).
"""
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.soak_load import Ledger
from shared.settings import Settings
from shared.store import EdgeStore, MemoryEntry, Scope, all_entries
from shared.store.builds import live_edge_path

DENSE_DIM = 384
EXAMPLES = 10


@dataclass
class Audit:
    """What the accounting found (the example lists hold a few turn ids of each problem)."""

    published: int = 0
    stored: int = 0              # in exactly one active episode
    lost: int = 0                # in no active episode, and not faded
    duplicated: int = 0          # in more than one active episode
    forgotten: int = 0           # of a forgotten user or conversation
    leaked: int = 0              # forgotten, yet still a source of some entry
    faded: int = 0               # its episode was removed by retention
    phantom: int = 0             # a source turn id the soak never had acknowledged
    unpublished: int = 0         # never acknowledged by JetStream in spite of retries
    entries: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def failures(self) -> int:
        """Turns accounted wrongly: lost, duplicated or leaked after a forget."""
        return self.lost + self.duplicated + self.leaked

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def account(entries: dict[str, list[MemoryEntry]], ledger: Ledger, faded_turns: set[tuple[str, str]]) -> Audit:
    """Compare the ledger's published turns with the entries of every tenant (a pure function, unit-testable)."""
    active: Counter[tuple[str, str]] = Counter()
    anywhere: dict[tuple[str, str], MemoryEntry] = {}   # a turn -> one entry naming it
    kinds: Counter[str] = Counter()
    for tenant, listed in entries.items():
        for entry in listed:
            state = "active" if entry.active else ("merged" if entry.merged_into else "superseded")
            kinds[f"{entry.kind} {state}"] += 1
            anywhere.update({(tenant, t): entry for t in entry.source_turn_ids})
            if entry.kind == "episodic" and entry.active:
                active.update((tenant, t) for t in entry.source_turn_ids)
    audit = Audit(published=len(ledger.published), unpublished=len(ledger.unpublished),
                  entries=dict(sorted(kinds.items())))
    problems: dict[str, list[str]] = {"lost": [], "duplicated": [], "leaked": [], "phantom": []}
    for key, (user_id, conversation_id) in ledger.published.items():
        tenant, turn_id = key
        if ledger.forgotten(tenant, user_id, conversation_id):
            audit.forgotten += 1
            if key in anywhere:
                audit.leaked += 1
                holder = anywhere[key]
                problems["leaked"].append(f"{tenant}/{turn_id} in {holder.kind} {holder.id} of {holder.conversation_id}"
                                          f" created {holder.created_at.isoformat()}"
                                          f"{' (merged keeper)' if holder.merged_from else ''}")
        elif active[key] == 1:
            audit.stored += 1
        elif active[key] > 1:
            audit.duplicated += 1
            problems["duplicated"].append(f"{tenant}/{turn_id} x{active[key]}")
        elif key in faded_turns:
            audit.faded += 1
        else:
            audit.lost += 1
            problems["lost"].append(f"{tenant}/{turn_id}")
    known = set(ledger.published) | set(ledger.unpublished)
    for key in sorted(set(anywhere) - known):
        audit.phantom += 1
        problems["phantom"].append("/".join(key))
    audit.examples = {name: found[:EXAMPLES] for name, found in problems.items() if found}
    return audit


async def audit_store(data_dir: Path, tenants: list[str], ledger: Ledger,
                      faded_turns: set[tuple[str, str]]) -> Audit:
    """Open the stopped engram's live Qdrant Edge shard (in `data_dir`) and account for every published turn."""
    store = EdgeStore.open(live_edge_path(Settings(data_dir=data_dir)), DENSE_DIM)
    try:
        entries = {tenant: await all_entries(store, Scope(tenant_id=tenant)) for tenant in tenants}
    finally:
        await store.close()
    return account(entries, ledger, faded_turns)
