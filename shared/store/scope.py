"""The one place where a scope and a filter become payload conditions; every backend query goes through it."""
from collections.abc import Iterable

from shared.errors import ConfigError
from shared.store.model import CONVERSATION_KEY, USER_KEY, Condition, EntryFilter, Scope, scoped_key

TENANT_FIELD = "tenant_id"
DISTINCT_KEYS = {"user_id": USER_KEY, "conversation_id": CONVERSATION_KEY}  # indexed, so listed from the index


def conditions(scope: Scope, entry_filter: EntryFilter | None = None) -> list[Condition]:
    """All conditions a read or delete must apply: the tenant first, always, then the scope and the filter."""
    if not isinstance(scope, Scope):  # a dict or None would otherwise slip past the type checker at runtime
        raise TypeError(f"scope must be a Scope, got {type(scope).__name__}")
    out = [Condition(key=TENANT_FIELD, op="eq", value=scope.tenant_id)]
    if scope.user_id is not None:
        out.append(Condition(key=USER_KEY, op="eq", value=scoped_key(scope.tenant_id, scope.user_id)))
    if scope.conversation_id is not None:
        out.append(Condition(key=CONVERSATION_KEY, op="eq", value=scoped_key(scope.tenant_id, scope.conversation_id)))
    return out + unscoped_conditions(entry_filter)


def unscoped_conditions(entry_filter: EntryFilter | None) -> list[Condition]:
    """The filter's conditions alone: only for reads across tenants that return counts or ids, never data."""
    out: list[Condition] = []
    f = entry_filter or EntryFilter()
    if f.persons:
        out.append(Condition(key="persons", op="any", value=list(f.persons)))
    if f.topics:
        out.append(Condition(key="topic", op="any", value=list(f.topics)))
    if f.location:
        out.append(Condition(key="location", op="eq", value=f.location))
    if f.kinds:
        out.append(Condition(key="kind", op="any", value=list(f.kinds)))
    if f.since or f.until:
        out.append(Condition(key="occurred_at", op="range", gte=f.since, lte=f.until))
    if f.ids:
        out.append(Condition(key="id", op="ids", value=list(f.ids)))
    if f.slot_keys:
        out.append(Condition(key="slot_key", op="any", value=list(f.slot_keys)))
    if not f.include_superseded:
        out.append(Condition(key="superseded_by", op="is_null"))
    if not f.include_merged:
        out.append(Condition(key="merged_into", op="is_null"))
    if f.never_recalled:
        out.append(Condition(key="last_accessed_at", op="is_null"))
    if f.without_user:
        out.append(Condition(key=USER_KEY, op="is_null"))
    if f.speaker_ids:
        out.append(Condition(key="speaker_ids", op="any", value=list(f.speaker_ids)))
    if f.updated_since or f.updated_before:
        out.append(Condition(key="updated_at", op="range", gte=f.updated_since, lt=f.updated_before))
    return out


def unscoped(scope: Scope, keys: Iterable[str]) -> list[str]:
    """User or conversation ids from their scoped keys (`<tenant>/<id>`), sorted; keys of other tenants dropped."""
    prefix = scoped_key(scope.tenant_id, "")
    return sorted(k[len(prefix):] for k in keys if k.startswith(prefix))


DISTINCT_LIMIT = 10_000_000  # owners listed at once: more than one tenant of one shard holds
# Payload indexes. Every query is filtered by tenant, so there is no collection-wide HNSW graph (m=0): the engine
# builds one graph per tenant (payload_m), and per user for users big enough to need one; a scope smaller than
# the full-scan threshold is scored directly from the payload index. The other fields only narrow a scope and
# get no graph of their own (`kind` alone would otherwise rebuild the whole collection's graph).
GRAPH_KEYWORD_INDEXES = (USER_KEY,)
KEYWORD_INDEXES = (CONVERSATION_KEY, "persons", "kind", "topic", "location", "superseded_by", "merged_into",
                   "slot_key", "speaker_ids")
OCCURRED_AT = "occurred_at"
DATETIME_INDEXES = (OCCURRED_AT, "updated_at")  # updated_at: the owners a scheduled run has work for
HNSW_M = 0          # no graph over all tenants together
HNSW_PAYLOAD_M = 16  # per-tenant (and per big user) graphs
HNSW_EF_CONSTRUCT = 100
FULL_SCAN_THRESHOLD_KB = 10_000  # the engine's default: below this many KB of vectors a scope is scored directly
# BM25: a scope of fewer entries than this is scored entry by entry instead of walking the query terms' posting
# lists across the collection. A tenant-wide recall over 10,000 of 1M entries: 9.7 → 3.7 ms p50; by user: same.
SPARSE_FULL_SCAN_THRESHOLD = 20_000


def check_layout(indexed_fields: set[str], where: str) -> None:
    """Refuse a store written before scopes were keyed by tenant (its entries lack the keys and would not match)."""
    if "user_id" in indexed_fields and USER_KEY not in indexed_fields:
        raise ConfigError(f"{where} was written by an older engram (entries filtered by user_id, not {USER_KEY}); "
                          "re-ingest into a new data folder or collection")
