"""What the store holds and how it is asked: entries, vectors, scope, filters and scored hits."""
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from engram_client.contract import EntryKind

DENSE = "dense"
SPARSE = "sparse"
_ID_NAMESPACE = uuid.UUID("6f1c1d52-8f7e-4b8a-9a53-3e2f3b6f0e11")
# Tenant-qualified copies of the user and conversation ids, kept in the payload for filtering: an id that
# many tenants use ("user-1") still selects exactly one tenant's points in the index, so the engine's
# cardinality estimate is exact and a small scope is scored directly instead of through the vector indexes.
USER_KEY = "user_key"
CONVERSATION_KEY = "conversation_key"


def scoped_key(tenant: str, value: str) -> str:
    """`<tenant>/<value>`: unambiguous, since tenant ids never contain '/'."""
    return f"{tenant}/{value}"


def entry_id(tenant: str, conversation_id: str, source_turn_ids: Iterable[str], kind: str = "episodic") -> str:
    """Deterministic entry id: UUIDv5 of tenant, conversation, kind and sorted source turns."""
    key = "\x1f".join((tenant, conversation_id, kind, *sorted(source_turn_ids)))
    return str(uuid.uuid5(_ID_NAMESPACE, key))


class TurnLines(BaseModel):
    """Where one turn of an episode is in its text: its speaker, and its first and last line (indices into
    `text.split("\\n")`; a turn's text may run over several lines). The lines no turn holds are the episode's own: a
    day's header, the quoted turn before the window."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    speaker: str
    first: int = Field(ge=0)
    last: int = Field(ge=0)


class MemoryEntry(BaseModel):
    """One memory entry: the payload of one Qdrant point. What the wire shows of it is in shared.retrieval.views."""

    # Fields a newer engram adds to the payload are ignored when an older one reads it.
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    tenant_id: str
    user_id: str | None = None
    agent_id: str | None = None
    conversation_id: str
    kind: EntryKind = "episodic"
    text: str
    keywords: list[str] = Field(default_factory=list)
    persons: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    location: str | None = None
    topic: str | None = None
    occurred_at: AwareDatetime
    created_at: AwareDatetime
    updated_at: AwareDatetime
    source_turn_ids: list[str] = Field(default_factory=list)
    # When each of the entry's own turns was said, in its order (a merge does not widen it; empty for entries written
    # before engram kept it): a question about the order of events is answered in this order.
    turn_times: list[AwareDatetime] = Field(default_factory=list)
    # Each of those turns' role ("user", "assistant" …), in the same order (empty for entries written before engram
    # kept it): a question in the first person is cut to the user's turns (shared/retrieval/excerpt.py).
    turn_roles: list[str] = Field(default_factory=list)
    # Where each of those turns is in `text`, as the compressor wrote it (episodes only; empty for entries written
    # before engram kept it): what a recall under a budget cuts an excerpt by (shared/retrieval/excerpt.py).
    turn_lines: list[TurnLines] = Field(default_factory=list)
    # Whose words the entry holds: the user id of every turn it was made from or could quote (a window's context),
    # so that forgetting a user finds the entries others own that hold their words; and the names they spoke
    # under, by user id, so that facts stated about them under that name are found too.
    speaker_ids: list[str] = Field(default_factory=list)
    speaker_names: dict[str, str] = Field(default_factory=dict)
    importance: float = 0.5
    access_count: int = 0
    last_accessed_at: AwareDatetime | None = None
    superseded_by: str | None = None
    valid_to: AwareDatetime | None = None          # when a newer statement of the same fact replaced this one
    merged_from: list[str] = Field(default_factory=list)
    merged_into: str | None = None                 # set on an entry a near-duplicate absorbed
    unmerged: dict[str, list[str]] | None = None    # a keeper's own lists before its group's were added
    # Facts only: what is stated, and the key a newer statement of the same fact shares (see compress.model.Slot).
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    slot_key: str | None = None
    slot_by_model: bool = False                     # the model said this statement states `slot_key`'s fact
    same_fact_checked: bool = False                 # the model was asked which facts this one states the same as
    outdated_by: str | None = None                  # a newer episode about the same thing (consolidation/outdated.py)

    @property
    def began_at(self) -> datetime:
        """When the entry's first turn was said (its `occurred_at` when the turns' times are not kept)."""
        return min(self.turn_times) if self.turn_times else self.occurred_at

    @property
    def ended_at(self) -> datetime:
        """When the entry's last turn was said (its `occurred_at` when the turns' times are not kept)."""
        return max(self.turn_times) if self.turn_times else self.occurred_at

    @property
    def active(self) -> bool:
        """Neither superseded nor merged away: what recall returns by default."""
        return self.superseded_by is None and self.merged_into is None

    def payload(self) -> dict[str, Any]:
        """The Qdrant payload (everything but the id, plus the scope keys), datetimes as RFC 3339 strings."""
        return {**self.model_dump(mode="json", exclude={"id"}),
                USER_KEY: scoped_key(self.tenant_id, self.user_id) if self.user_id is not None else None,
                CONVERSATION_KEY: scoped_key(self.tenant_id, self.conversation_id)}

    @classmethod
    def from_point(cls, point_id: object, payload: dict[str, Any]) -> "MemoryEntry":
        """Rebuild an entry from a stored point."""
        fields = {k: v for k, v in payload.items() if k not in (USER_KEY, CONVERSATION_KEY)}
        return cls.model_validate({**fields, "id": str(point_id)})


class SparseVector(BaseModel):
    """A sparse (BM25) vector: term hashes and their weights."""

    model_config = ConfigDict(frozen=True)

    indices: list[int]
    values: list[float]


class Vectors(BaseModel):
    """The two named vectors of a point."""

    model_config = ConfigDict(frozen=True)

    dense: list[float]
    sparse: SparseVector


class StoredEntry(BaseModel):
    """An entry with its vectors, ready to upsert."""

    model_config = ConfigDict(frozen=True)

    entry: MemoryEntry
    vectors: Vectors


class Scope(BaseModel):
    """Whose memories a read or delete may touch. The tenant is required: there is no unscoped query."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    user_id: str | None = None
    conversation_id: str | None = None


class EntryFilter(BaseModel):
    """Optional narrowing inside a scope."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    persons: list[str] = Field(default_factory=list)   # any of
    topics: list[str] = Field(default_factory=list)    # any of
    location: str | None = None
    kinds: list[EntryKind] = Field(default_factory=list)
    since: datetime | None = None                      # occurred_at >= since
    until: datetime | None = None                      # occurred_at <= until
    ids: list[str] = Field(default_factory=list)
    slot_keys: list[str] = Field(default_factory=list)  # any of
    include_superseded: bool = True                    # False: leave out superseded facts
    include_merged: bool = True                        # False: leave out entries merged into another
    never_recalled: bool = False                       # True: only entries no recall has returned yet
    without_user: bool = False                         # True: only entries that name no user
    speaker_ids: list[str] = Field(default_factory=list)  # any of: entries holding words of these users
    updated_since: datetime | None = None              # updated_at >= updated_since
    updated_before: datetime | None = None             # updated_at < updated_before


class Condition(BaseModel):
    """One backend-neutral payload condition; the backends translate these mechanically."""

    model_config = ConfigDict(frozen=True)

    key: str
    op: Literal["eq", "any", "range", "ids", "is_null"]
    value: Any = None
    gte: datetime | None = None
    lte: datetime | None = None
    lt: datetime | None = None


class Boost(BaseModel):
    """Raise a hit's fused score by `weight` times itself when any of the conditions holds on its payload.

    Applied in the engine after fusion, over the fused candidates, so only the hits returned leave it.
    """

    model_config = ConfigDict(frozen=True)

    weight: float
    any_of: list[Condition]


class HybridSearch(BaseModel):
    """One hybrid search of a batch: its vectors, filter, boosts and sizes (as `Store.hybrid_query` takes them)."""

    model_config = ConfigDict(frozen=True)

    vectors: Vectors
    limit: int
    entry_filter: EntryFilter | None = None
    prefetch_limit: int = 40
    rrf_k: int = 3
    boosts: list[Boost] = Field(default_factory=list)
    candidates: int = 0
    # The entries of the scope BM25 counts its IDF over; None: all of them. A job whose result feeds back into the
    # scope (profiles, facts) counts over what it reads only, so that running it again finds the same.
    idf_corpus: EntryFilter | None = None


class VectorRead(BaseModel):
    """A read of a batch (`Store.reads`): the `limit` entries nearest one of the vectors (`using`), under its own scope
    and filter, as `Store.search` returns them."""

    model_config = ConfigDict(frozen=True)

    scope: Scope
    vectors: Vectors
    using: Literal["dense", "sparse"]
    limit: int
    entry_filter: EntryFilter | None = None


class TimeRead(BaseModel):
    """A read of a batch (`Store.reads`): up to `limit` entries by `occurred_at` under its own scope and filter, the
    earliest first (the newest first with `newest`), as `Store.earliest` and `Store.newest` return them."""

    model_config = ConfigDict(frozen=True)

    scope: Scope
    limit: int
    entry_filter: EntryFilter | None = None
    newest: bool = False


Read = VectorRead | TimeRead


class ScoredEntry(BaseModel):
    """A hit: the entry, its fused score and, when asked, its rank and score in each search."""

    model_config = ConfigDict(frozen=True)

    entry: MemoryEntry
    score: float
    dense_rank: int | None = None
    dense_score: float | None = None
    sparse_rank: int | None = None
    sparse_score: float | None = None
    vector: list[float] | None = None


class Page(BaseModel):
    """One page of a scroll (with each entry's dense vector when asked)."""

    model_config = ConfigDict(frozen=True)

    entries: list[MemoryEntry]
    next_offset: str | None = None
    dense: list[list[float]] | None = None
