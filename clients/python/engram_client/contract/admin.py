"""Operator messages: forget, entries (list / get / history) and consolidate, with their replies."""
from typing import Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from engram_client.contract.base import MAX_IDS, EntryId, Id, Reply, TenantScoped

EntryKind = Literal["episodic", "fact", "profile"]


class Forget(TenantScoped):
    """Delete everything stored for exactly one of: a user, a conversation, or a list of entries."""

    user_id: Id | None = None
    conversation_id: Id | None = None
    entry_ids: list[EntryId] | None = Field(default=None, min_length=1, max_length=MAX_IDS)

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        named = [name for name in ("user_id", "conversation_id", "entry_ids") if getattr(self, name) is not None]
        if len(named) != 1:
            raise ValueError(f"name exactly one of user_id, conversation_id, entry_ids (got {named or 'none'})")
        return self


class DeletedCounts(BaseModel):
    """How much of the subject a Forget found in each place its data lives."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries: int = 0            # stored entries, of every kind (superseded and merged-away included)
    rewritten: int = 0          # entries others own that held the subject's words, written again without them
    working_memory: int = 0     # conversations whose working-memory buffer was removed or had turns taken out
    turns: int = 0              # turn texts held in working memory
    queued_turns: int = 0       # turns and flushes in the stream (kept for rebuilds, or not yet ingested)
    dead_letters: int = 0       # dead-lettered messages about the subject

    @property
    def total(self) -> int:
        """Everything counted, in every place."""
        return self.entries + self.rewritten + self.turns + self.queued_turns + self.dead_letters


class ForgetResult(Reply):
    """The reply to Forget: a receipt of what was deleted, and of what a check afterwards still found.

    `verified` is true when the check (a count of the subject's entries, working memory, queued turns and dead
    letters, and a recall and an entries listing scoped to the subject) found nothing left.
    """

    deleted: DeletedCounts = Field(default_factory=DeletedCounts)
    remaining: DeletedCounts = Field(default_factory=DeletedCounts)
    verified: bool = False


class EntriesRequest(TenantScoped):
    """Admin access to stored entries: `list` (filtered, paged), `get` (by ids) or `history` (of one id); who owns
    them: `users` (the user ids, of one conversation when given) or `conversations` (the conversation ids, of one
    user when given), in order, `limit` at a time after `after`; or `counts` (entries of each kind in the scope).

    `list` pages in id order by default (`cursor`); with `order: newest`, the most recent first (`before`)."""

    op: Literal["list", "get", "history", "users", "conversations", "counts"] = "list"
    user_id: Id | None = None
    conversation_id: Id | None = None
    kind: EntryKind | None = None
    ids: list[EntryId] = Field(default_factory=list, max_length=MAX_IDS)
    limit: int = Field(default=50, ge=1, le=500)
    order: Literal["id", "newest"] = "id"
    cursor: EntryId | None = None    # list in id order: the next_cursor of an earlier reply
    # list, newest first: entries at or before this instant (a next_cursor); with before_id (a next_cursor_id),
    # the entries of that instant from this id on, in id order, then the older ones
    before: AwareDatetime | None = None
    before_id: EntryId | None = None
    after: Id | None = None          # users / conversations: the last owner of an earlier page (its next_cursor)

    @model_validator(mode="after")
    def _ids_for_get(self) -> Self:
        if self.op in ("get", "history") and not self.ids:
            raise ValueError(f"op {self.op!r} needs ids")
        if self.op == "history" and len(self.ids) != 1:
            raise ValueError("op 'history' takes exactly one id")
        if self.cursor is not None and self.order != "id":
            raise ValueError("cursor pages a listing in id order; a newest-first listing pages with before")
        if self.before_id is not None and self.before is None:
            raise ValueError("before_id names an entry of the instant `before`; give both")
        return self


class EntryView(BaseModel):
    """A stored entry as operators see it: the whole payload, no vectors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    user_id: str | None = None
    agent_id: str | None = None
    conversation_id: str
    kind: EntryKind
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
    importance: float = 0.5
    access_count: int = 0
    last_accessed_at: AwareDatetime | None = None
    superseded_by: str | None = None
    valid_to: AwareDatetime | None = None
    merged_from: list[str] = Field(default_factory=list)
    merged_into: str | None = None
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    slot_key: str | None = None
    slot_by_model: bool = False    # the chat model said this statement states `slot_key`'s fact
    outdated_by: str | None = None  # a fact possibly outdated: the newer episode about the same thing


class EntriesResponse(Reply):
    """The reply to EntriesRequest."""

    entries: list[EntryView] = Field(default_factory=list)
    owners: list[str] = Field(default_factory=list)  # users / conversations: the page of owner ids, in order
    # counts: entries of each kind in the scope, and `replaced`: those superseded or merged away (kept as history)
    counts: dict[str, int] = Field(default_factory=dict)
    next_cursor: str | None = None
    next_cursor_id: str | None = None  # a newest-first listing: the next page's before_id (with next_cursor as before)


ConsolidationJob = Literal["merge", "supersede", "score", "forget", "profile"]


class ConsolidateRequest(TenantScoped):
    """Run the consolidation jobs for this tenant now (all when `jobs` is empty)."""

    jobs: list[ConsolidationJob] = Field(default_factory=list, max_length=5)
    user_id: Id | None = None


class ConsolidationSummary(Reply):
    """What one consolidation run did."""

    owners: int = 0             # users (and conversations naming no user) whose memory the run went through
    scored: int = 0             # entries whose importance changed
    merged: int = 0             # entries newly merged into a near-duplicate
    superseded: int = 0         # facts newly superseded by a newer statement
    forgotten: int = 0          # entries removed by retention (low score, TTL, per-user cap)
    profiles_updated: int = 0
    started_at: AwareDatetime | None = None
    duration_ms: float = 0.0


class RebuildRequest(BaseModel):
    """Re-derive the long-term memory from the turns the stream retains into build `into`, then switch to it.

    The build uses the serving consolidator's embedder, compressor and settings; `window_turns` overrides its
    window size for this build (set the ingestors' ENGRAM_WINDOW_TURNS to match afterwards).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    into: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    window_turns: int | None = Field(default=None, ge=1, le=64)


class RebuildReport(Reply):
    """What a rebuild did: what it read, wrote and carried over, and which build it replaced (kept, for a
    rollback)."""

    into: str = ""
    replaced: str | None = None
    window_turns: int = 0
    turns_replayed: int = 0       # turns of the stream that went into the new build's windows
    turns_left_to_live: int = 0   # turns waiting in working memory: the ingestor writes them into the live build
    unreadable: int = 0           # stream messages that are not a valid turn or flush (they were dead-lettered)
    windows: int = 0
    entries_written: int = 0
    entries_carried: int = 0      # entries of the old build whose turns the stream no longer holds, or that the
                                  # ingestor wrote while the rebuild ran, copied as they were
    forgets_applied_again: int = 0  # forget requests answered during the rebuild, applied to the new build too
    seconds: float = 0.0
