"""How much an entry matters, from signals a person would recognise; a pure function of the entry's content.

Personal facts, preferences, plans and commitments, named people and places and dates raise an episode's score;
small talk ("haha ok, thanks!") keeps it low. Facts and profiles keep the score their extraction gave them.
An entry that states a preference, a plan or a commitment is *durable*: its retention does not decay with age.
"""
from dataclasses import dataclass

from shared.evidence.lines import utterances
from shared.store import MemoryEntry
from shared.text import patterns, scripts

_PREFERENCE = patterns.compile(
    r"\b(?:i|we)\s++(?:really\s++|absolutely\s++|just\s++)?(?:love|like|enjoy|adore|hate|prefer|dislike|can't stand)\b|"
    r"\bfavou?rite\b|\ballergic\b|\bvegetarian\b|\bvegan\b|"
    r"我(?:很|最|非常|特别)?(?:喜欢|爱|讨厌|不喜欢)|过敏|吃素|最爱", patterns.IGNORECASE)
_COMMITMENT = patterns.compile(
    r"\b(?:i|we)(?:'ll|\s++will|\s++am going to|'m going to|'m gonna|\s++plan to|'m planning to|\s++promise)\b|"
    r"\b(?:remind me|don't forget|deadline|appointment|next (?:week|month|year)|tomorrow)\b|"
    r"我(?:会|要|打算|计划|准备|答应)|明天|下周|下个月|明年|记得", patterns.IGNORECASE)
_PERSONAL = patterns.compile(
    r"\b(?:my (?:wife|husband|partner|girlfriend|boyfriend|mom|mum|dad|mother|father|sister|brother|son|daughter|"
    r"kids?|family|job|boss|birthday|dog|cat)|i (?:live|moved|work|study|was born|grew up))\b|"
    r"我(?:的)?(?:老婆|老公|妻子|丈夫|妈妈|爸爸|儿子|女儿|家人|工作|生日)|我住在|我搬到|我在.{1,12}工作",
    patterns.IGNORECASE)
_DATE = patterns.compile(r"\(\d{1,2} [A-Z][a-z]++ \d{4}\)|\b(?:19|20)\d{2}\b|\d{4}年|\d{1,2}月\d{1,2}日")
_SMALL_TALK = patterns.compile(
    r"^(?:hi|hey|hello|yo|thanks|thank you|lol|haha++|ha|ok|okay|cool|nice|great|awesome|wow|bye|see you|"
    r"good (?:night|morning)|how are you|same|yeah|yes|no|sure|omg|you too|me too|take care|sounds good|"
    r"你好|谢谢|哈哈++|好的|嗯|再见|晚安|早安|是的|对)[\s!.,?~。！，？]*+$", patterns.IGNORECASE)
_DIGIT = patterns.compile(r"\d")
SUBSTANTIAL_WORDS = 12


@dataclass(frozen=True)
class Signals:
    """What an entry's text shows."""

    preference: bool
    commitment: bool
    personal: bool
    named: bool
    dated: bool
    small_talk: bool
    counted: bool  # a digit in its own lines

    @property
    def durable(self) -> bool:
        """Preferences and commitments (and personal facts) do not fade with age alone."""
        return self.preference or self.commitment or self.personal


def _chatty(lines: list[str]) -> bool:
    """Few words in these lines, or mostly chatter ("thanks!", "haha")."""
    words = sum(scripts.approximate_words(line) for line in lines)
    chatter = sum(1 for line in lines if _SMALL_TALK.match(line))
    return words < SUBSTANTIAL_WORDS or (bool(lines) and chatter * 2 >= len(lines))


def signals(entry: MemoryEntry) -> Signals:
    """The signals in an entry's text and fields."""
    lines = utterances(entry.text)
    text = "\n".join(lines)
    small_talk = _chatty(lines)
    speakers = {p for p in entry.persons[:2]}
    return Signals(
        preference=bool(_PREFERENCE.search(text)), commitment=bool(_COMMITMENT.search(text)),
        personal=bool(_PERSONAL.search(text)),
        named=bool(entry.entities) or any(p not in speakers for p in entry.persons[2:]),
        dated=bool(_DATE.search(entry.text)), small_talk=small_talk, counted=bool(_DIGIT.search(text)))


def importance(entry: MemoryEntry) -> float:
    """A score in [0, 1]: facts and profiles keep theirs; an episode's comes from its signals."""
    if entry.kind != "episodic":
        return entry.importance
    found = signals(entry)
    score = 0.3
    score += 0.2 if found.personal else 0.0
    score += 0.15 if found.preference else 0.0
    score += 0.15 if found.commitment else 0.0
    score += 0.1 if found.named else 0.0
    score += 0.1 if found.dated else 0.0
    if found.small_talk and not found.durable:
        score = min(score, 0.1)
    return round(min(score, 1.0), 3)


def small_talk(entry: MemoryEntry) -> bool:
    """Whether an episode is chatter with nothing of its own to say ("thanks, have fun!"), for ranking by recency.

    Few words besides its context line, or mostly chatter, and nothing durable, named or counted: a short window
    that names a place or gives a figure ("we moved to Graz", "rent went up to 1200") may be the news itself.
    """
    # The line test first: most windows have something to say, and it decides them without the other signals
    # (this runs for every hit of the band on every recall).
    if entry.kind != "episodic" or not _chatty(utterances(entry.text)):
        return False
    found = signals(entry)
    return not found.durable and not found.named and not found.counted


def durable(entry: MemoryEntry) -> bool:
    """Whether age alone may make the entry fade (facts and profiles never; episodes by their signals)."""
    return entry.kind != "episodic" or signals(entry).durable
