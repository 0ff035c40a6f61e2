"""The LLM path of compression: a window's statements and facts from the chat model, checked against the window,
with the offline compressor's raw episode always kept and the offline rules taking over when the model cannot."""
from shared.compress.facts.extractor import SPEAKING_ROLES
from shared.compress.facts.fact import Fact
from shared.compress.facts.render import draft
from shared.compress.model import Compressor, Draft, FactExtractor, Window
from shared.errors import LlmInvalid, LlmUnavailable
from shared.llm import LlmClient, fell_back, prompts
from shared.llm.schemas import MAX_STATEMENTS, CompressedWindow, ExtractedFacts
from shared.text import language, scripts

CHINESE_SHARE = 0.2  # of a statement's letters, when the window is Chinese: below it the model wrote another language


def _language(window: Window, fallback: str) -> str:
    return language.detect_iso(" ".join(t.text for t in window.turns), fallback)


def _han_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(1 for c in letters if scripts.is_han(c)) / len(letters) if letters else 0.0


def _statement_problem(window: Window, lang: str, answer: CompressedWindow) -> str | None:
    by_id = {t.turn_id: t for t in window.turns}
    for i, statement in enumerate(answer.statements):
        foreign = [t for t in statement.source_turn_ids if t not in by_id]
        if foreign:
            return (f"statements[{i}].source_turn_ids has {foreign[:3]}, which are not ids of `turns` "
                    f"(allowed: {sorted(by_id)})")
        # A statement belongs to one person: forgetting them must find it, and nobody else may recall it.
        users = {u for t in statement.source_turn_ids if (u := by_id[t].user_id) is not None}
        if len(users) > 1:
            return (f"statements[{i}] restates turns of different users ({sorted(users)}); give each person's "
                    "turns their own statements")
        if lang == "zh" and _han_share(statement.text) < CHINESE_SHARE:
            return f"statements[{i}].text is not written in Chinese, the language of the turns"
    return None


class LlmCompressor:
    """A `Compressor`: the raw window as its episode (offline, always), plus the model's statements.

    Statements are self-contained restatements (no pronouns, absolute dates) stored as slotless facts; answers
    that do not validate are repaired once, then the window keeps its episode alone and the fallback is counted.
    """

    statements_per_window = MAX_STATEMENTS

    def __init__(self, llm: LlmClient, offline: Compressor, fallback_language: str = "english") -> None:
        self._llm = llm
        self._offline = offline
        self._fallback = fallback_language

    async def compress(self, window: Window) -> list[Draft]:
        """The episode, then the statements in the model's order (none if the model could not)."""
        episode = await self._offline.compress(window)
        lang = _language(window, self._fallback)
        document = prompts.document("compress", language=lang, conversation_id=window.conversation_id,
                                    turns=[prompts.turn_json(t) for t in window.turns],
                                    context=[prompts.turn_json(t) for t in window.context])
        try:
            answer = await self._llm.ask(window.tenant_id, "compress", document, CompressedWindow,
                                         check=lambda a: _statement_problem(window, lang, a))
        except (LlmUnavailable, LlmInvalid) as exc:
            fell_back("compress", exc)
            return episode
        order = {t.turn_id: i for i, t in enumerate(window.turns)}
        by_id = {t.turn_id: t for t in window.turns}
        drafts = []
        for statement in answer.statements:
            sources = sorted(set(statement.source_turn_ids), key=order.__getitem__)
            if not any(by_id[t].role in SPEAKING_ROLES for t in sources):
                continue  # the assistant's own words (advice, questions) are the episode's, not a person's memory
            # Dated by when it was said, like a fact (its text carries any other date): supersede orders by this,
            # and a statement of a future plan must not outrank what is said later.
            owned = [t for t in sources if by_id[t].user_id is not None]
            sources = owned[:1] + [t for t in sources if t not in owned[:1]]  # its first source names its owner
            drafts.append(Draft(
                kind="fact", text=statement.text.strip(), persons=list(dict.fromkeys(statement.persons)),
                entities=list(dict.fromkeys(statement.entities)), keywords=list(dict.fromkeys(statement.keywords)),
                location=statement.location, topic=statement.topic, importance=statement.importance,
                occurred_at=by_id[sources[0]].ts, source_turn_ids=sources))
        return episode + drafts


def _facts_problem(window: Window, answer: ExtractedFacts) -> str | None:
    by_id = {t.turn_id: t for t in window.turns}
    for i, fact in enumerate(answer.facts):
        turn = by_id.get(fact.source_turn_id)
        if turn is None:
            return f"facts[{i}].source_turn_id {fact.source_turn_id!r} is not an id of `turns`"
        if fact.subject.casefold() != turn.speaker.casefold():
            return (f"facts[{i}].subject {fact.subject!r} is not the speaker of turn {turn.turn_id!r} "
                    f"({turn.speaker!r}); only facts speakers state about themselves count")
    return None


class LlmFactExtractor:
    """A `FactExtractor`: the model finds the facts speakers state about themselves; the offline rules when not.

    The model names the slot; code keeps what a slot means (its subject is the speaker of the stating turn, one
    fact per slot and turn), and supersede decides which statement is current.
    """

    def __init__(self, llm: LlmClient, rules: FactExtractor, fallback_language: str = "english") -> None:
        self._llm = llm
        self._rules = rules
        self._fallback = fallback_language

    async def extract(self, window: Window) -> list[Draft]:
        """Fact drafts of the window's speaking turns."""
        speaking = [t for t in window.turns if t.role in SPEAKING_ROLES]
        if not speaking:
            return []
        lang = _language(window, self._fallback)
        document = prompts.document("facts", language=lang, turns=[prompts.turn_json(t) for t in speaking])
        try:
            answer = await self._llm.ask(window.tenant_id, "facts", document, ExtractedFacts,
                                         check=lambda a: _facts_problem(window, a))
        except (LlmUnavailable, LlmInvalid) as exc:
            fell_back("facts", exc)
            return await self._rules.extract(window)
        by_id = {t.turn_id: t for t in speaking}
        found: dict[tuple[str, str], Draft] = {}
        for fact in answer.facts:
            turn = by_id.get(fact.source_turn_id)
            if turn is None:  # an assistant's turn: not a statement about a person
                continue
            attribute = fact.attribute.strip().lower()
            found.setdefault((turn.turn_id, attribute), draft(
                Fact(attribute=attribute, value=fact.value.strip(), statement=fact.text.strip().rstrip(".。")),
                turn, lang))
        return list(found.values())
