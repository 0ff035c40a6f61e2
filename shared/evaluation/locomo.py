"""The LoCoMo benchmark as engram sees it: sessions as turns, questions with normalised evidence, the metric."""
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engram_client.contract import Turn
from shared.compress import IMAGE_CAPTION_KEY
from shared.text import patterns

SCORED_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = patterns.compile(r"D(\d+):0*(\d+)")
_EVIDENCE_SEPARATORS = patterns.compile(r"[;,\s]+")


@dataclass(frozen=True)
class Question:
    """One QA item with its evidence turn ids normalised."""

    question: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: its sessions as engram turns, and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    sessions: list[list[Turn]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def user_id(self) -> str:
        """The one user every session of this conversation belongs to."""
        return f"locomo-{self.sample_id}"

    @property
    def turns(self) -> list[Turn]:
        """Every turn, in order."""
        return [t for s in self.sessions for t in s]

    def scored(self) -> list[Question]:
        """Questions of categories 1-4 with at least one resolvable evidence id."""
        known = {t.turn_id for t in self.turns}
        return [q for q in self.questions if q.category in SCORED_CATEGORIES and q.evidence and q.evidence <= known]


def normalise_evidence(raw: Iterable[str]) -> frozenset[str]:
    """Repair the known quirks: "D8:6; D9:17", "D:11:26", "D30:05", parentheses, space-separated lists."""
    out = set()
    for item in raw:
        for part in _EVIDENCE_SEPARATORS.split(str(item)):
            part = part.strip("()[]").replace("D:", "D")
            match = _EVIDENCE.fullmatch(part)
            if match:
                out.add(f"D{match.group(1)}:{match.group(2)}")
    return frozenset(out)


def parse_session_time(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as an aware datetime (UTC: the data names no zone)."""
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path) -> Conversation:
    """Read one LoCoMo conversation file; each session becomes one conversation_id, every turn one Turn."""
    data = json.loads(path.read_text())
    sample = path.stem
    speakers = (data["speaker_a"], data["speaker_b"])
    user_id = f"locomo-{sample}"
    sessions = []
    n = 1
    while f"session_{n}" in data or f"session_{n + 1}" in data:
        raw = data.get(f"session_{n}") or []
        if raw:
            start = parse_session_time(data[f"session_{n}_date_time"])
            turns = []
            for i, item in enumerate(raw):
                caption = item.get("blip_caption")
                turns.append(Turn(
                    conversation_id=f"{sample}-s{n}", turn_id=item["dia_id"], speaker=item["speaker"],
                    role="user", text=item["text"] or "…", ts=start + timedelta(seconds=30 * i), user_id=user_id,
                    metadata={IMAGE_CAPTION_KEY: caption} if caption else {}))
            sessions.append(turns)
        n += 1
    questions = [Question(q["question"], int(q["category"]), normalise_evidence(q.get("evidence", [])))
                 for q in data.get("qa", [])]
    return Conversation(sample_id=sample, speakers=speakers, sessions=sessions, questions=questions)


def files(folder: Path) -> list[Path]:
    """The conversation files in a LoCoMo folder, in name order."""
    return sorted(p for p in folder.glob("*.json") if p.stem.isdigit())


def score(evidence: frozenset[str], retrieved: Iterable[Iterable[str]]) -> tuple[bool, bool, float]:
    """all@k, any@k and frac@k of one question, given the source turn ids of the top-k items."""
    found = set().union(*map(set, retrieved)) if retrieved else set()
    hit = evidence & found
    return evidence <= found, bool(hit), len(hit) / len(evidence)
