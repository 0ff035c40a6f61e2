"""The rule-based fact extractor: each user turn, sentence by sentence, through its language's rules."""
import asyncio

from engram_client.contract import Turn
from shared.compress.facts import chinese, english
from shared.compress.facts.fact import Reader, Said
from shared.compress.facts.render import draft
from shared.compress.model import Draft, Window
from shared.text import language

READERS: dict[str, Reader] = {"en": english.READER, "zh": chinese.READER}
SPEAKING_ROLES = frozenset({"user", "other"})  # an assistant's or system's words are not facts about a person
# A sentence said in chat runs to a few hundred characters (the longest of LoCoMo and the update stories, 420); a
# longer one is pasted text, not a statement, and the rules read nothing from it. So what a rule reads around each
# match (the words before and after it) is bounded, and a turn costs time linear in its length.
MAX_SENTENCE_CHARS = 1_000


def facts_in_turn(turn: Turn, lang: str) -> list[Draft]:
    """The facts the speaker of `turn` states about themself, at most one per slot: the last one said, since what
    a turn says later is what holds after it ("Lisa and I broke up. I've been seeing Jana since September").

    Args:
        lang: ISO code of the turn's language ("en", "zh"); other languages have no rules yet and give none.
    """
    reader = READERS.get(lang)
    if reader is None or turn.role not in SPEAKING_ROLES:
        return []
    said = Said(speaker=turn.speaker, ts=turn.ts)
    found: dict[str, tuple[tuple[int, int], Draft]] = {}
    for index, sentence in enumerate(reader.sentences(turn.text)):
        if len(sentence) > MAX_SENTENCE_CHARS or reader.is_question(sentence):
            continue
        for rule in reader.rules:
            for hit in rule(sentence, said):
                where = (index, hit.start)
                earlier = found.get(hit.fact.attribute)
                if (earlier is not None and earlier[0] >= where) or \
                        reader.blocked(sentence[:hit.start], sentence[hit.end:]):
                    continue
                found[hit.fact.attribute] = (where, draft(hit.fact, turn, lang))
    return [d for _, d in sorted(found.values(), key=lambda item: item[0])]


class RuleFactExtractor:
    """A `FactExtractor` made of offline rules: no network, deterministic, precision before coverage."""

    def extract_sync(self, window: Window) -> list[Draft]:
        """Facts stated in the window's turns (context turns are not sources), in turn order."""
        lang = language.detect_iso(" ".join(t.text for t in window.turns), "english")
        return [d for turn in window.turns for d in facts_in_turn(turn, lang)]

    async def extract(self, window: Window) -> list[Draft]:
        """`extract_sync` off the event loop (the rules are CPU work, dateparser included)."""
        return await asyncio.to_thread(self.extract_sync, window)
