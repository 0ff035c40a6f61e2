"""Recall: the request other services send to `<prefix>.<tenant>.recall` and its response."""
from typing import Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from engram_client.contract.admin import EntryKind
from engram_client.contract.base import MAX_K, MAX_LIST_ITEMS, MAX_TOKEN_BUDGET, Id, Name, Query, Reply, TenantScoped
from engram_client.contract.turns import Turn


class RecallFilters(BaseModel):
    """Hard filters on the entries a recall may return."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    persons: list[Name] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    topics: list[Name] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    location: Name | None = None
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.since and self.until and self.since > self.until:
            raise ValueError(f"filters.since {self.since.isoformat()} is after filters.until {self.until.isoformat()}")
        return self


class RecallRequest(TenantScoped):
    """Ask for the memories that matter to `query`, scoped to a user and/or conversation when given."""

    query: Query
    user_id: Id | None = None
    conversation_id: Id | None = None
    k: int = Field(default=10, ge=1, le=MAX_K)
    filters: RecallFilters | None = None
    mode: Literal["fast", "deep"] = "fast"
    token_budget: int | None = Field(default=None, ge=1, le=MAX_TOKEN_BUDGET)
    include_working_memory: bool = False
    include_superseded: bool = False   # also entries a newer fact superseded or a near-duplicate absorbed
    explain: bool = False


class Explanation(BaseModel):
    """Why an entry matched: its rank and score in each search, the query terms that hit, what applied, and
    (`ordering`) why it moved for the time the question asks about: newer evidence first for the present, older
    for an earlier state, a derived claim below newer evidence, a fact possibly outdated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dense_rank: int | None = None
    dense_score: float | None = None
    sparse_rank: int | None = None
    sparse_score: float | None = None
    fused_score: float = 0.0
    matched_terms: list[str] = Field(default_factory=list)
    filters: list[str] = Field(default_factory=list)
    boosts: list[str] = Field(default_factory=list)
    ordering: list[str] = Field(default_factory=list)


class RecalledEntry(BaseModel):
    """One memory entry as a recall returns it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: EntryKind = "episodic"
    text: str
    score: float
    occurred_at: AwareDatetime
    persons: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    location: str | None = None
    topic: str | None = None
    keywords: list[str] = Field(default_factory=list)
    source_turn_ids: list[str] = Field(default_factory=list)
    conversation_id: str
    explanation: Explanation | None = None


class Timings(BaseModel):
    """Where the time of one recall went, in milliseconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    embed: float = 0.0
    search: float = 0.0
    plan: float = 0.0
    total: float = 0.0


class PlannedSearch(BaseModel):
    """One search a deep recall ran: the round it belongs to (1 is the plan), what the model asked for, the hits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    query: str
    keywords: list[str] = Field(default_factory=list)
    persons: list[str] = Field(default_factory=list)
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None
    why: str = ""
    hits: int = 0


DeepStop = Literal["sufficient", "max_rounds", "deadline", "no_model", "model_failed", "busy"]


class DeepTrace(BaseModel):
    """What a deep recall planned and ran (with `explain`), and why it stopped searching."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rounds: int = 0
    searches: list[PlannedSearch] = Field(default_factory=list)
    stopped: DeepStop = "max_rounds"


class RecallResponse(Reply):
    """The answer to a RecallRequest: entries, working memory, and a context rendered within the budget.

    `working_memory_summary` sums up the conversation's older recent turns when they exceed the summary budget
    (`working_memory` then holds the newest turns only); `deep` is set for a deep recall asked with `explain`.
    """

    entries: list[RecalledEntry] = Field(default_factory=list)
    working_memory: list[Turn] = Field(default_factory=list)
    working_memory_summary: str | None = None
    context: str = ""
    context_tokens: int = 0
    timings_ms: Timings = Field(default_factory=Timings)
    deep: DeepTrace | None = None
