"""What consolidation does to LoCoMo: evidence recall@k before and after, entries per kind, facts per attribute.

Consolidation must make memory smaller and current without costing recall: the same questions are asked of the
same store before and after one run of every job.
"""
from collections import Counter
from dataclasses import dataclass, field
from typing import get_args

from engram_client.contract import ConsolidateRequest, ConsolidationSummary, EntryKind, Event
from shared.consolidation.run import Consolidation, consolidate
from shared.evaluation import locomo
from shared.evaluation.plain import ConversationScore, evaluate
from shared.retrieval import Retrieval
from shared.store import EntryFilter, MemoryEntry, Scope, Store, all_entries


@dataclass
class ConsolidationScore:
    """One conversation before and after consolidation."""

    sample_id: str
    before: ConversationScore
    after: ConversationScore
    summary: ConsolidationSummary
    active_before: dict[str, int] = field(default_factory=dict)   # entries recall may return, by kind
    active_after: dict[str, int] = field(default_factory=dict)
    facts_by_attribute: dict[str, int] = field(default_factory=dict)


async def quiet(tenant: str, event: Event) -> None:
    """Publish nowhere (the evaluation has no broker)."""


async def active_by_kind(store: Store, tenant: str) -> dict[str, int]:
    """Entries recall may return (not superseded, not merged away), by kind."""
    return {kind: await store.count(Scope(tenant_id=tenant), EntryFilter(kinds=[kind], include_superseded=False,
                                                                      include_merged=False))
            for kind in get_args(EntryKind)}


async def facts_of(store: Store, tenant: str) -> list[MemoryEntry]:
    """Every fact of the tenant."""
    return await all_entries(store, Scope(tenant_id=tenant), EntryFilter(kinds=["fact"]))


async def evaluate_consolidation(retrieval: Retrieval, consolidation: Consolidation, tenant: str,
                                 conversation: locomo.Conversation, before: ConversationScore | None = None,
                                 k: int = 10) -> ConsolidationScore:
    """Score, consolidate the tenant once (every job), score again. `before` skips the first scoring."""
    store = retrieval.store
    before = before or await evaluate(retrieval, tenant, conversation, k)
    active_before = await active_by_kind(store, tenant)
    summary = await consolidate(consolidation, tenant, ConsolidateRequest())
    after = await evaluate(retrieval, tenant, conversation, k)
    attributes = Counter((f.attribute or "").split(":", 1)[0] for f in await facts_of(store, tenant))
    return ConsolidationScore(sample_id=conversation.sample_id, before=before, after=after, summary=summary,
                              active_before=active_before, active_after=await active_by_kind(store, tenant),
                              facts_by_attribute=dict(attributes.most_common()))
