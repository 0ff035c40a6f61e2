"""What a compressor takes (a window of turns) and gives (entry drafts), and the Compressor protocol."""
import itertools
from typing import Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from engram_client.contract import EntryKind, Turn
from shared.store.model import TurnLines


class Window(BaseModel):
    """Turns of one conversation that close together, plus earlier turns quoted for context only."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    conversation_id: str
    turns: list[Turn] = Field(min_length=1)
    context: list[Turn] = Field(default_factory=list)  # precede `turns`; not sources of the entries


_KEY_SEPARATOR = "\x1f"


class Slot(BaseModel):
    """What a fact states: about whom (`subject`), which attribute, which value.

    `key` names the slot a newer statement replaces: for a single-valued attribute (where someone lives) the
    subject and attribute; for one keyed by its object (a preference for sushi, an allergy to peanuts) the
    attribute already carries the object ("preference:sushi"), so statements about other objects never collide.
    """

    model_config = ConfigDict(frozen=True)

    subject: str
    attribute: str
    value: str

    @property
    def key(self) -> str:
        """The supersede key: the same key with another value is a newer statement of the same fact."""
        return f"{self.subject.casefold()}{_KEY_SEPARATOR}{self.attribute}"

    @staticmethod
    def attribute_of(key: str) -> str:
        """The attribute a supersede key names (see `key`)."""
        return key.rpartition(_KEY_SEPARATOR)[2]


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
    turn_lines: list[TurnLines] = Field(default_factory=list)  # an episode written line by line: where each turn is
    importance: float = 0.5
    slot: Slot | None = None  # facts only


def turn_lines(lines: list[str], turns: list[tuple[int, str]]) -> list[TurnLines]:
    """Where each turn is in `"\\n".join(lines)`: `turns` are (the index in `lines` of the turn's entry, its speaker);
    an entry of `lines` may hold several lines of text."""
    starts = list(itertools.accumulate((line.count("\n") + 1 for line in lines), initial=0))
    return [TurnLines(speaker=speaker, first=starts[i], last=starts[i + 1] - 1) for i, speaker in turns]


class Compressor(Protocol):
    """Turns a window of chat turns into self-contained memory entries.

    `statements_per_window`: the most slotless fact drafts ("statements") `compress` returns for one window; the
    writer gives them ids by position and deletes those past the count a later compression of the window gave.
    """

    statements_per_window: int

    async def compress(self, window: Window) -> list[Draft]:
        """Entries that together cover every turn of the window."""


class FactExtractor(Protocol):
    """Finds statements about a person in a window's turns (offline rules now, an LLM later)."""

    async def extract(self, window: Window) -> list[Draft]:
        """Fact drafts (`kind="fact"`, `slot` set, one source turn each), precision before coverage."""
