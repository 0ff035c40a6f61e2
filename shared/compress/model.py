"""What a compressor takes (a window of turns) and gives (entry drafts), and the Compressor protocol."""
from typing import Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.contract import EntryKind, Turn


class Window(BaseModel):
    """Turns of one conversation that close together, plus earlier turns quoted for context only."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    conversation_id: str
    turns: list[Turn] = Field(min_length=1)
    context: list[Turn] = Field(default_factory=list)  # precede `turns`; not sources of the entries


class Draft(BaseModel):
    """A memory entry as a compressor writes it, before ids, vectors and bookkeeping."""

    model_config = ConfigDict(frozen=True)

    kind: EntryKind = "episodic"
    text: str
    persons: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    location: str | None = None
    topic: str | None = None
    occurred_at: AwareDatetime
    source_turn_ids: list[str] = Field(min_length=1)
    importance: float = 0.5


class Compressor(Protocol):
    """Turns a window of chat turns into self-contained memory entries."""

    async def compress(self, window: Window) -> list[Draft]:
        """Entries that together cover every turn of the window."""
