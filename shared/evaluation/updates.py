"""The update-stories evaluation set: stories of a user whose facts change, questions about now, before and what never
changed, and how a recall's ranking is scored against them.

The stories were written from the wire contract alone by an author who had not read engram's code, then split once
at random into a dev half (tune on it) and a test half (measure only). They live beside this module as
`data/updates/{dev,test}.jsonl`, with `dev2.jsonl` to `dev10.jsonl`, written later by other authors, to tune on.
`within-{dev,test}.jsonl` are a second set, split the same way: long working sessions with an assistant in which
a figure or a date changes within one conversation, minutes apart (a twelfth author, issue 38).
Matching is by substring, case-folded, of the answer's spellings in an entry's text (the stored text restates the
turns nearly word for word), except that a number is found only whole: "20" is not in "2023", nor "3.1" in "3.12".
"""
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from engram_client.contract import Turn
from shared.compress.facts.render import without_stated
from shared.evaluation.stories import Session, StoryUser, in_run, load_lines, split_by_language
from shared.text import patterns

DATA_DIR = Path(__file__).parent / "data" / "updates"
Split = Literal["dev", "dev2", "dev3", "dev4", "dev5", "dev6", "dev7", "dev8", "dev9", "dev10",
                "test", "within-dev", "within-test"]  # dev2-10, within-dev: to tune on
QuestionKind = Literal["present", "past", "unchanged"]
SPLIT_SEED = 20261125  # the one split; never re-drawn


class Question(BaseModel):
    """A question and the spellings of its answer: `current` and `old` for the present, `expect` otherwise."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: QuestionKind
    query: str
    asked_at: AwareDatetime
    current: list[str] = Field(default_factory=list)
    old: list[str] = Field(default_factory=list)
    expect: list[str] = Field(default_factory=list)


class Story(BaseModel):
    """One update story."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    language: Literal["en", "zh"]
    category: str
    change: str
    user: StoryUser
    sessions: list[Session]
    questions: list[Question]

    def turns(self, run: str | None = None) -> list[list[Turn]]:
        """The story's sessions as engram turns, every turn carrying the story's user; a `run` prefixes the ids
        so that runs never share them (None: the ids as written)."""
        return [[Turn(conversation_id=in_run(run, s.conversation_id), turn_id=t.turn_id, speaker=t.speaker,
                      role=t.role, text=t.text, ts=t.ts, user_id=self.user_id(run)) for t in s.turns]
                for s in self.sessions]

    def user_id(self, run: str | None = None) -> str:
        """The story's user id in one run."""
        return in_run(run, self.user.user_id)


def load(path: Path) -> list[Story]:
    """Stories from a JSON-lines file."""
    return load_lines(path, Story)


def split_path(split: Split, folder: Path = DATA_DIR) -> Path:
    """Where a half of the set is."""
    return folder / f"{split}.jsonl"


def split(stories: Sequence[Story], seed: int = SPLIT_SEED) -> tuple[list[Story], list[Story]]:
    """Dev and test halves, drawn at random within each language (done once, when the set was committed)."""
    return split_by_language(stories, seed)


# Digits before or after a spelling's digit make a longer number ("2023" for "20", "3.12" for "3.1", "11,200" for
# "1,200"); a letter does not make a longer word ("Wednesdays" says "Wednesday").
_LONGER_BEFORE = patterns.compile(r"\d[.,]?$")
_LONGER_AFTER = patterns.compile(r"[.,]?\d")  # matched at the end of the spelling


def _found(spelling: str, folded: str) -> bool:
    start = folded.find(spelling)
    while start >= 0:
        end = start + len(spelling)
        # A longer number ends in the three characters before the spelling (a digit, a point, a line break).
        longer_before = spelling[:1].isdigit() and _LONGER_BEFORE.search(folded, max(0, start - 3), start)
        if not longer_before and not (spelling[-1:].isdigit() and _LONGER_AFTER.match(folded, end)):
            return True
        start = folded.find(spelling, end if spelling else start + 1)
    return False


def _holds(text: str, spellings: Sequence[str]) -> bool:
    """Whether the text names one of the spellings (case-folded; a number only whole)."""
    folded = text.casefold()
    return any(_found(s.casefold(), folded) for s in spellings)


class Judged(BaseModel):
    """One question's outcome in one recall."""

    model_config = ConfigDict(frozen=True)

    story: str
    language: str
    change: str
    category: str
    kind: QuestionKind
    query: str
    current_rank: int | None = None  # 1-based rank of the first entry holding the answer (current or expected)
    old_rank: int | None = None      # present questions: of the first entry holding an old value and not the current
    top_kind: str | None = None      # kind of the entry ranked first

    @property
    def old_above(self) -> bool:
        """An outdated value ranks above the current one (or the current one is missing)."""
        return self.old_rank is not None and (self.current_rank is None or self.old_rank < self.current_rank)

    @property
    def top(self) -> bool:
        """The entry ranked first holds the answer."""
        return self.current_rank == 1


def judge(story: Story, question: Question, texts: Sequence[str], kinds: Sequence[str]) -> Judged:
    """Where the answer and the outdated values rank among the recalled entries' texts (best first)."""
    answer = question.current if question.kind == "present" else question.expect
    said = [without_stated(t) for t in texts]  # a fact's "(stated 20 May 2023)" says when, and no figure of 20
    current = next((i for i, t in enumerate(said, 1) if _holds(t, answer)), None)
    old = None
    if question.kind == "present" and question.old:
        old = next((i for i, t in enumerate(said, 1) if _holds(t, question.old) and not _holds(t, answer)), None)
    return Judged(story=story.id, language=story.language, change=story.change, category=story.category,
                  kind=question.kind, query=question.query, current_rank=current, old_rank=old,
                  top_kind=kinds[0] if kinds else None)


def stale_profile_lines(story: Story, profile_text: str | None) -> list[str]:
    """Lines of the user's profile that state a value a later statement of the story replaced."""
    if not profile_text:
        return []
    replaced = [v for q in story.questions if q.kind == "present" for v in q.old
                if not any(_holds(c, [v]) or _holds(v, [c]) for c in q.current)]
    return [line for line in _statements(profile_text) if replaced and _holds(line, replaced)]


def profile_holds_current(story: Story, profile_text: str | None) -> bool:
    """Whether a line of the user's profile states the current value of the story's present question: how much of
    what holds the profile still says, beside the stale lines it must not have."""
    if not profile_text:
        return False
    present = next(q for q in story.questions if q.kind == "present")
    return any(_holds(line, present.current) for line in _statements(profile_text))


def _statements(profile_text: str) -> list[str]:
    """What a profile's lines state: not its headers ("Profile of Avi (as of 11 November 2023):", one per person it
    is about), nor the date each line was stated ("(stated 20 May 2023)" says when, and no figure of 20)."""
    return [without_stated(line) for line in profile_text.splitlines() if line.startswith("- ")]


class FactCheck(BaseModel):
    """What the user's active facts say about a story's present question after consolidation."""

    model_config = ConfigDict(frozen=True)

    story: str
    current: int = 0          # active facts naming the current value
    stale: int = 0            # active facts naming a replaced value (and not the current one), unmarked
    stale_marked: int = 0     # the same, marked possibly outdated (kept, out of the profile, ranked below)
    current_marked: int = 0   # facts naming the current value wrongly marked possibly outdated


def check_facts(story: Story, facts: Sequence[tuple[str, bool]]) -> FactCheck:
    """Count a story's active facts (text, marked outdated) by the value they name for its present question (not
    in the date each was stated)."""
    present = next(q for q in story.questions if q.kind == "present")
    counts = {"current": 0, "stale": 0, "stale_marked": 0, "current_marked": 0}
    for said, marked in facts:
        text = without_stated(said)
        if _holds(text, present.current):
            counts["current_marked" if marked else "current"] += 1
        elif present.old and _holds(text, present.old):
            counts["stale_marked" if marked else "stale"] += 1
    return FactCheck(story=story.id, **counts)


class Figures(BaseModel):
    """The measured rates of one group of stories (a language, a kind of change, or all)."""

    stories: int = 0
    present: int = 0
    old_above: float = 0.0       # share of present questions where an outdated value ranks above the current
    top_current: float = 0.0     # share of present questions whose first entry holds the current value
    past: int = 0
    past_at_k: float = 0.0       # share of past questions whose answer is in the top k
    unchanged: int = 0
    unchanged_at_k: float = 0.0  # share of questions about what never changed answered in the top k
    unchanged_top: float = 0.0   # ... answered by the first entry
    unchanged_top3: float = 0.0  # ... answered in the first three entries
    stale_profiles: int = 0      # profiles with a line stating a replaced value
    profiles_current: int = 0    # profiles with a line stating the current value of the present question
    facts_current: int = 0       # stories with an active fact naming the current value
    facts_stale: int = 0         # stories with an active, unmarked fact naming a replaced value
    facts_marked: int = 0        # stories whose stale facts were all marked possibly outdated
    facts_wrongly_marked: int = 0  # stories with a current fact marked possibly outdated


def figures(judged: Sequence[Judged], stale: dict[str, list[str]], k: int,
            facts: Sequence[FactCheck] = (), profile_current: Collection[str] = ()) -> Figures:
    """Rates over a group of judged questions (and the stale profile lines of its stories, and which of its stories'
    profiles state the current value)."""
    present = [j for j in judged if j.kind == "present"]
    past = [j for j in judged if j.kind == "past"]
    unchanged = [j for j in judged if j.kind == "unchanged"]
    stories = {j.story for j in judged}

    def found(items: Sequence[Judged]) -> float:
        return sum(1 for j in items if j.current_rank is not None and j.current_rank <= k) / len(items) if items \
            else 0.0

    return Figures(
        stories=len(stories), present=len(present),
        old_above=sum(j.old_above for j in present) / len(present) if present else 0.0,
        top_current=sum(j.top for j in present) / len(present) if present else 0.0,
        past=len(past), past_at_k=found(past),
        unchanged=len(unchanged), unchanged_at_k=found(unchanged),
        unchanged_top=sum(j.top for j in unchanged) / len(unchanged) if unchanged else 0.0,
        unchanged_top3=sum(1 for j in unchanged if j.current_rank is not None and j.current_rank <= 3)
        / len(unchanged) if unchanged else 0.0,
        stale_profiles=sum(1 for s in stories if stale.get(s)),
        profiles_current=sum(1 for s in stories if s in profile_current),
        facts_current=sum(1 for f in facts if f.story in stories and f.current),
        facts_stale=sum(1 for f in facts if f.story in stories and f.stale),
        facts_marked=sum(1 for f in facts if f.story in stories and f.stale_marked and not f.stale),
        facts_wrongly_marked=sum(1 for f in facts if f.story in stories and f.current_marked))
