"""Recall: the request other services send to `<prefix>.<tenant>.recall` and its response."""
from typing import Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from engram_client.contract.admin import EntryKind
from engram_client.contract.base import MAX_K, MAX_LIST_ITEMS, MAX_TOKEN_BUDGET, Id, Name, Query, Reply, TenantScoped
from engram_client.contract.turns import Role, Turn


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


DEFAULT_K = 10  # entries a recall returns when it names neither k nor a token budget


class RecallRequest(TenantScoped):
    """Ask for the memories that matter to `query`, scoped to a user and/or conversation when given.

    `k` is how many entries at most; `token_budget` the size of the rendered context. With a budget and no k, the
    budget alone decides: recall returns the best set of entries that fits it, one entry per piece of evidence.
    With neither, k is 10.
    """

    query: Query
    user_id: Id | None = None
    conversation_id: Id | None = None
    k: int | None = Field(default=None, ge=1, le=MAX_K)
    filters: RecallFilters | None = None
    mode: Literal["fast", "deep"] = "fast"
    token_budget: int | None = Field(default=None, ge=1, le=MAX_TOKEN_BUDGET)
    include_working_memory: bool = False
    include_superseded: bool = False   # also entries a newer fact superseded or a near-duplicate absorbed
    explain: bool = False

    @property
    def limit(self) -> int:
        """The most entries this recall may return: k, or with a budget alone as many as fit, or 10."""
        if self.k is not None:
            return self.k
        return MAX_K if self.token_budget is not None else DEFAULT_K


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
    hop: int = 1                 # 1: the query found it; 2: a link from an entry the query found
    via: list[str] = Field(default_factory=list)  # for a second-hop entry: the links that brought it


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
    # When each of the entry's own turns was said (a merge's keeper lists more sources than its own turns)
    turn_times: list[AwareDatetime] = Field(default_factory=list)
    conversation_id: str
    # True when a budget cut the entry to the turns the question is about: `text`, `source_turn_ids` and
    # `turn_times` are those turns' (the whole entry: `entries` op "get" by its id, or a recall without a budget)
    excerpt: bool = False
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


class PlannedTime(BaseModel):
    """A span of time the query names ("last week", "May 2023")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    phrase: str
    start: AwareDatetime
    end: AwareDatetime


class RecallPlan(BaseModel):
    """The one reading of the query every step of recall used (shown with `explain`): its language, the times and
    names it says, its content terms, the time it asks about (`orientation`: present, earlier or event, and the words
    that said so), how it asks for a figure, whether it asks for the order of events (`sequence`: then the entries
    come oldest first, as a dated timeline), whose turns a question in its asker's voice is about (`roles`: the
    user's for "what did I…", excerpts keep those turns), and how many entries at most within what budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    language: str
    terms: list[str] = Field(default_factory=list)
    names: list[str] = Field(default_factory=list)
    times: list[PlannedTime] = Field(default_factory=list)
    orientation: Literal["present", "earlier", "event"] = "present"
    orientation_cue: str = ""
    figure: str | None = None
    sequence: str | None = None
    roles: list[Role] = Field(default_factory=list)  # a question in its asker's voice: whose turns it is about
    limit: int = DEFAULT_K
    token_budget: int | None = None
    candidates: int = 0
    second_hop: int = 0  # candidates the second hop added


class RecallResponse(Reply):
    """The answer to a RecallRequest: entries, working memory, and a context rendered within the budget.

    Entries come most relevant first, or oldest first when the question asks for the order of events (the context
    is then a dated timeline).

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
    plan: RecallPlan | None = None  # with explain
    # Relevant entries (ranked within the limit, not repeating evidence already returned) that the token budget
    # left out, and their tokens: what a larger budget would add.
    left_out: int = 0
    left_out_tokens: int = 0
