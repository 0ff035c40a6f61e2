"""What the evaluation sets written as stories share: a story's turns, sessions and user as their authors wrote them,
reading a set's JSON Lines, the one random split within each language, run-scoped ids, and an evaluation's ingest
through NATS (any conversations)."""
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict

from engram_client import MemoryClient, publish_sessions, wait_until_stored
from engram_client.contract import Turn


class StoryTurn(BaseModel):
    """One turn of a story, as the author wrote it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_id: str
    speaker: str
    role: Literal["user", "assistant"]
    text: str
    ts: AwareDatetime


class Session(BaseModel):
    """One conversation of a story."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conversation_id: str
    turns: list[StoryTurn]


class StoryUser(BaseModel):
    """The person the story is about."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    name: str


class _Story(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def language(self) -> str: ...


M = TypeVar("M", bound=BaseModel)
S = TypeVar("S", bound=_Story)


def load_lines(path: Path, model: type[M]) -> list[M]:
    """The stories of a JSON Lines file, one per line."""
    return [model.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split_by_language(stories: Sequence[S], seed: int) -> tuple[list[S], list[S]]:
    """Dev and test halves, drawn at random within each language from the stories in the order given (done once,
    when a set is committed); each half sorted by id."""
    rng = random.Random(seed)
    dev: list[S] = []
    test: list[S] = []
    for language in sorted({s.language for s in stories}):
        group = [s for s in stories if s.language == language]
        rng.shuffle(group)
        half = len(group) // 2
        dev += group[:half]
        test += group[half:]
    return sorted(dev, key=lambda s: s.id), sorted(test, key=lambda s: s.id)


def in_run(run: str | None, value: str) -> str:
    """An id of one run (`<run>-<id>`), so that runs never share them; the id as written without a run."""
    return f"{run}-{value}" if run else value


async def publish_and_wait(client: MemoryClient, sessions: Sequence[Sequence[Turn]], timeout_s: float = 1800) -> float:
    """Publish conversations' sessions through NATS as a product would, wait until every turn is recallable, and say
    how many seconds that took (an evaluation's ingest)."""
    started = time.perf_counter()
    await publish_sessions(client, sessions)
    await wait_until_stored(client, [t for s in sessions for t in s], timeout_s=timeout_s)
    return time.perf_counter() - started
