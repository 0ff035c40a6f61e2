"""The offline compressor: deterministic, no network; a window becomes one self-contained, dated entry."""
import asyncio
from datetime import datetime

from engram_client.contract import Turn
from shared.compress import dates, extract
from shared.compress.model import Draft, Window, turn_lines
from shared.text import language, scripts

IMAGE_CAPTION_KEY = "image_caption"  # metadata key a product may set when a turn shares an image
PHOTO_OPEN = " [shares a photo: "      # how a turn's line ends when it shares an image: the caption, in brackets
SHORT_REPLY_WORDS = 8
CONTEXT_PREFIX = "(before: "  # the line quoting the turn before a window that opens with a short reply


def _day(ts: datetime, lang: str) -> str:
    if lang == "zh":
        return f"{ts.year}年{ts.month}月{ts.day}日"
    return f"{ts.strftime('%a')} {ts.day} {ts.strftime('%B %Y')}"


def _line(turn: Turn, lang: str) -> tuple[str, list[dates.ResolvedPhrase]]:
    text, found = dates.annotate(turn.text.strip(), lang, turn.ts)
    caption = turn.metadata.get(IMAGE_CAPTION_KEY)
    if isinstance(caption, str) and caption.strip():
        text += f"{PHOTO_OPEN}{caption.strip()}]"
    return f"{turn.speaker}: {text}", found


def spoken(line: str) -> str:
    """A turn's last line without the photo caption `_line` may have put after its words."""
    if line.endswith("]") and PHOTO_OPEN in line:
        return line.rpartition(PHOTO_OPEN)[0]
    return line


def _clip(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0] if " " in text[:max_chars] else text[:max_chars]
    return cut + "…"


class OfflineCompressor:
    """Restates a window as dated lines: who said what, relative times made absolute, short replies in context.

    Args:
        context_chars: how much of the turn before the window is quoted when the window opens with a short
            reply, so "Yes, twice!" keeps its question; 0 quotes nothing.
    """

    statements_per_window = 0  # one episode per window, no statements

    def __init__(self, context_chars: int = 160, fallback_language: str = "english") -> None:
        self._context_chars = context_chars
        self._fallback = fallback_language

    @staticmethod
    def _is_short_reply(turn: Turn) -> bool:
        # A long opening turn stands on its own; quoting its predecessor would only cost tokens.
        return scripts.approximate_words(turn.text) < SHORT_REPLY_WORDS

    def compress_sync(self, window: Window) -> list[Draft]:
        """The window as one entry (plain function; `compress` is its async face)."""
        turns = sorted(window.turns, key=lambda t: t.ts)
        lang = language.detect_iso(" ".join(t.text for t in turns), self._fallback)
        lines: list[str] = []
        spoken: list[tuple[int, str]] = []  # each turn's entry in `lines`, and its speaker
        day = None
        for turn in turns:
            if turn.ts.date() != day:
                day = turn.ts.date()
                lines.append(f"[{_day(turn.ts, lang)}]")
                if window.context and len(lines) == 1 and self._context_chars and self._is_short_reply(turn):
                    before = window.context[-1]
                    quoted = _clip(before.text.strip().replace("\n", " "), self._context_chars)
                    # one line, whatever the speaker's name holds: an excerpt tells it by its prefix
                    lines.append(f"{CONTEXT_PREFIX}{before.speaker}: {quoted})".replace("\n", " "))
            line, _ = _line(turn, lang)
            spoken.append((len(lines), turn.speaker))
            lines.append(line)
        texts = [t.text for t in turns]
        people = extract.persons((t.speaker for t in turns), texts)
        things = extract.entities(texts, exclude=people)
        return [Draft(
            text="\n".join(lines),
            persons=people,
            entities=things,
            keywords=extract.keywords(texts, exclude=people),
            occurred_at=turns[0].ts,
            source_turn_ids=[t.turn_id for t in turns],
            turn_lines=turn_lines(lines, spoken),
        )]

    async def compress(self, window: Window) -> list[Draft]:
        """The window as one entry, written on a worker thread (date parsing and extraction are CPU work that
        must not hold up the event loop answering recalls)."""
        return await asyncio.to_thread(self.compress_sync, window)
