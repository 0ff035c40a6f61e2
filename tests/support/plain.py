"""The plain-function memory path the integration tests drive: a writer and a retrieval over one store, and the
LoCoMo conversations stored that way."""
from dataclasses import dataclass

from shared.evaluation import locomo
from shared.evaluation.plain import ConversationScore
from shared.ingest.writer import Writer
from shared.retrieval import Retrieval
from shared.store import EdgeStore


@dataclass
class Memory:
    """A writer and a retrieval over one store."""

    writer: Writer
    retrieval: Retrieval
    store: EdgeStore


@dataclass(frozen=True)
class LocomoMemory:
    """The LoCoMo dev conversations stored through the plain functions, with what scored them."""

    retrieval: Retrieval
    conversations: dict[str, locomo.Conversation]
    scores: dict[str, ConversationScore]
