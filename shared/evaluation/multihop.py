"""The multi-session stories (issue 37): questions whose evidence is two to four turns of different sessions
(multi_hop), questions about the order of events (ordering) and single-turn controls (single_hop), each with its
evidence turns. Written from the wire contract alone by an author who had not read engram's code, then split once,
at random within each language (SPLIT_SEED), into `dev.jsonl` (tune on it) and `test.jsonl` (measure only).

A question is found when every evidence turn is a source of an entry the recall returned (all-evidence turn
recall, the strict measure); an ordering question is in order when it is found and the first entry holding each
event comes in the order the events happened.
"""
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from engram_client.contract import Turn
from shared.evaluation.stories import Session, StoryUser, in_run, load_lines, split_by_language

DATA_DIR = Path(__file__).parent / "data" / "multihop"
Split = Literal["dev", "test"]
QuestionType = Literal["multi_hop", "ordering", "single_hop"]
SPLIT_SEED = 20261203  # the one split; never re-drawn


class Key(BaseModel):
    """A turn: its conversation and its id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conversation_id: str
    turn_id: str


class Question(BaseModel):
    """A question, its evidence turns and, for an ordering question, the events in the order they happened."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    type: QuestionType
    question: str
    asked_at: AwareDatetime
    answer: str
    evidence: list[Key]
    order: list[Key] = Field(default_factory=list)


class Story(BaseModel):
    """One multi-session story of a user."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    language: Literal["en", "zh"]
    user: StoryUser
    sessions: list[Session]
    questions: list[Question]

    def turns(self, run: str | None = None) -> list[list[Turn]]:
        """The sessions as engram turns of the story's user (the friend's turns of a friend chat too); a `run`
        prefixes the conversation and user ids so that runs never share them."""
        return [[Turn(conversation_id=in_run(run, s.conversation_id), turn_id=t.turn_id, speaker=t.speaker,
                      role=t.role, text=t.text, ts=t.ts, user_id=self.user_id(run)) for t in s.turns]
                for s in self.sessions]

    def user_id(self, run: str | None = None) -> str:
        """The story's user id in one run."""
        return in_run(run, self.user.user_id)


def load(path: Path) -> list[Story]:
    """The stories of a JSON Lines file."""
    return load_lines(path, Story)


class Distractors(BaseModel):
    """More chats of a story's user that a search for its questions also finds but that answer none of them (hard
    negatives: the same people, places and words), written after the split by an author who had not read engram's
    code: the `--distractors` variant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    story: str
    sessions: list[Session]


def distractors_path(split: Split, folder: Path = DATA_DIR) -> Path:
    """Where a half's distractor sessions are."""
    return folder / f"distractors-{split}.jsonl"


def load_distractors(path: Path) -> list[Distractors]:
    """The distractor sessions of a JSON Lines file, a story's on each line."""
    return load_lines(path, Distractors)


def with_distractors(stories: Sequence[Story], distractors: Sequence[Distractors]) -> list[Story]:
    """Each story with its distractor sessions added (its questions and evidence unchanged).

    Raises:
        ValueError: a story without distractors, distractors of no story, or a distractor session whose
            conversation id is one of the story's own.
    """
    by_story = {d.story: d for d in distractors}
    missing = sorted({s.id for s in stories} ^ set(by_story))
    if missing:
        raise ValueError(f"distractors and stories do not match: {missing[:5]}")
    out = []
    for story in stories:
        own = {s.conversation_id for s in story.sessions}
        added = by_story[story.id].sessions
        clash = own & {s.conversation_id for s in added}
        if clash:
            raise ValueError(f"{story.id}: distractor sessions reuse the story's conversations {sorted(clash)}")
        out.append(story.model_copy(update={"sessions": [*story.sessions, *added]}))
    return out


class Rewrite(BaseModel):
    """A question as its story's user would ask it, in the first person ("Which city did I go to…?", "我先去了…"),
    written after the split by an author who had not read engram's code: the `--first-person` variant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    story: str
    question: str
    text: str


def first_person_path(split: Split, folder: Path = DATA_DIR) -> Path:
    """Where a half's questions in the first person are."""
    return folder / f"firstperson-{split}.jsonl"


def load_rewrites(path: Path) -> list[Rewrite]:
    """The questions in the first person of a JSON Lines file, one on each line."""
    return load_lines(path, Rewrite)


def in_first_person(stories: Sequence[Story], rewrites: Sequence[Rewrite]) -> list[Story]:
    """Each story with its questions asked in the first person (their evidence and order unchanged).

    Raises:
        ValueError: a question without its rewrite, or a rewrite of no question.
    """
    by_key = {(r.story, r.question): r.text for r in rewrites}
    asked = {(s.id, q.id) for s in stories for q in s.questions}
    unmatched = sorted(asked ^ set(by_key))
    if unmatched:
        raise ValueError(f"first-person questions and stories do not match: {unmatched[:5]}")
    return [story.model_copy(update={"questions": [q.model_copy(update={"question": by_key[(story.id, q.id)]})
                                                   for q in story.questions]}) for story in stories]


def verbose(stories: Sequence[Story], chars: int) -> list[Story]:
    """Each assistant turn lengthened to at least `chars` characters with the assistant's replies of the other
    stories of its language (the next ones in id order, in turn), as a verbose assistant writes: a harder variant
    where the user's turns, which hold the evidence, are a small part of each window (same questions, evidence and
    times). Friend chats, which have no assistant, stay as they are."""
    out: list[Story] = []
    for _, same in itertools.groupby(sorted(stories, key=lambda s: (s.language, s.id)), key=lambda s: s.language):
        group = list(same)
        for i, story in enumerate(group):
            others = [t.text for other in group[i + 1:] + group[:i] for s in other.sessions for t in s.turns
                      if t.role == "assistant"]
            pool = itertools.cycle(others or [""])
            sessions = []
            for session in story.sessions:
                turns = []
                for turn in session.turns:
                    text = turn.text
                    while turn.role == "assistant" and others and len(text) < chars:
                        text += ("" if story.language == "zh" else " ") + next(pool)
                    turns.append(turn.model_copy(update={"text": text}))
                sessions.append(session.model_copy(update={"turns": turns}))
            out.append(story.model_copy(update={"sessions": sessions}))
    return out


def crowded(stories: Sequence[Story], size: int) -> list[Story]:
    """The stories with every `size` of one language (in id order) under one user, the first's: each question then
    searches `size` people's memories, its own story's among the others' (a harder variant of the same set, with the
    same questions and evidence; size 1 leaves the stories as they are)."""
    if size < 1:
        raise ValueError(f"a crowd holds at least one story, not {size}")
    out: list[Story] = []
    for _, same in itertools.groupby(sorted(stories, key=lambda s: (s.language, s.id)), key=lambda s: s.language):
        group = list(same)
        for start in range(0, len(group), size):
            crowd = group[start:start + size]
            out += [story.model_copy(update={"user": crowd[0].user}) for story in crowd]
    return out


@dataclass(frozen=True)
class Variant:
    """Which harder reading of the stories a run uses: `crowd` stories a user, each story's distractor sessions,
    the questions in the user's own voice, a verbose assistant."""

    crowd: int = 1
    distractors: bool = False
    first_person: bool = False
    verbose: int = 0  # each assistant turn at least this many characters (verbose); 0: as written

    def name(self, split: str) -> str:
        """The run's name in file names: `dev`, `test-distractors-crowd4`, `dev-firstperson` …"""
        return (split + ("-distractors" if self.distractors else "") + ("-firstperson" if self.first_person else "")
                + (f"-verbose{self.verbose}" if self.verbose else "")
                + (f"-crowd{self.crowd}" if self.crowd > 1 else ""))

    def title(self) -> str:
        """How a table's title says it."""
        return ((", with distractors" if self.distractors else "")
                + (", in the first person" if self.first_person else "")
                + (f", assistant turns of {self.verbose}+ characters" if self.verbose else "")
                + (f", {self.crowd} stories a user" if self.crowd > 1 else ""))

    def stories(self, split: Split) -> list[Story]:
        """The half's stories, as this variant reads them."""
        stories = load(split_path(split))
        if self.distractors:
            stories = with_distractors(stories, load_distractors(distractors_path(split)))
        if self.first_person:
            stories = in_first_person(stories, load_rewrites(first_person_path(split)))
        if self.verbose:
            stories = verbose(stories, self.verbose)
        return crowded(stories, self.crowd)


def split_path(split: Split, folder: Path = DATA_DIR) -> Path:
    """Where a half of the set is."""
    return folder / f"{split}.jsonl"


def split(stories: Sequence[Story], seed: int = SPLIT_SEED) -> tuple[list[Story], list[Story]]:
    """Dev and test halves, drawn at random within each language from the stories in id order (done once, when the
    set was committed)."""
    return split_by_language(sorted(stories, key=lambda s: s.id), seed)


class Hit(BaseModel):
    """A recalled entry as the judge reads it: its conversation (the run's prefix removed), its source turns and
    when it happened."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    turn_ids: list[str]
    occurred_at: datetime
    tokens: int = 0


class Judged(BaseModel):
    """One question's outcome."""

    model_config = ConfigDict(frozen=True)

    story: str
    question: str
    language: str
    type: QuestionType
    evidence: int
    found: int                 # evidence turns among the recalled entries' sources
    first_found: bool          # at least one evidence turn found
    all_found: bool
    in_order: bool | None = None  # ordering questions: all found and their entries in the order of the events
    entries: int = 0
    context_tokens: int = 0


def judge(story: Story, question: Question, hits: Sequence[Hit], context_tokens: int) -> Judged:
    """How much of the question's evidence the recalled entries hold, and whether an ordering question's events come
    in the order they happened."""
    def position(key: Key) -> int | None:
        for i, hit in enumerate(hits):
            if hit.conversation_id == key.conversation_id and key.turn_id in hit.turn_ids:
                return i
        return None

    places = [position(k) for k in question.evidence]
    found = sum(p is not None for p in places)
    all_found = found == len(places)
    in_order = None
    if question.type == "ordering":
        events = [position(k) for k in question.order]
        in_order = all_found and all(a is not None and b is not None and a < b
                                     for a, b in itertools.pairwise(events))
    return Judged(story=story.id, question=question.id, language=story.language, type=question.type,
                  evidence=len(places), found=found, first_found=found > 0, all_found=all_found, in_order=in_order,
                  entries=len(hits), context_tokens=context_tokens)


class Figures(BaseModel):
    """A group of questions' figures."""

    questions: int = 0
    all_evidence: float = 0.0     # all-evidence recall: every evidence turn found
    any_evidence: float = 0.0
    turn_recall: float = 0.0      # evidence turns found, of all
    in_order: float | None = None  # ordering questions in chronological order with all their evidence
    mean_context_tokens: float = 0.0


def figures(judged: Sequence[Judged]) -> Figures:
    """The figures of these questions."""
    if not judged:
        return Figures()
    n = len(judged)
    ordering = [j for j in judged if j.in_order is not None]
    return Figures(questions=n, all_evidence=sum(j.all_found for j in judged) / n,
                   any_evidence=sum(j.first_found for j in judged) / n,
                   turn_recall=sum(j.found for j in judged) / max(1, sum(j.evidence for j in judged)),
                   in_order=sum(bool(j.in_order) for j in ordering) / len(ordering) if ordering else None,
                   mean_context_tokens=sum(j.context_tokens for j in judged) / n)
