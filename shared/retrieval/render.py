"""Rendering recalled entries and recent turns into one context block within a token budget."""
from datetime import UTC

from engram_client.contract import Turn
from shared.store import ScoredEntry
from shared.text import tokens

MEMORIES_HEADER = "Memories (most relevant first):"
TIMELINE_HEADER = "Timeline (oldest first):"
RECENT_HEADER = "Recent turns:"
SUMMARY_HEADER = "Summary of earlier turns:"
MIN_SUMMARY_TOKENS = 20  # a summary cut shorter than this says too little to be worth its header


def _turn_line(turn: Turn) -> str:
    return f"{turn.speaker} ({turn.ts.date().isoformat()}): {turn.text}"


def block(hit: ScoredEntry, timeline: bool = False) -> str:
    """An entry as the context holds it; on a timeline, dated when its text does not begin with its date."""
    text = hit.entry.text
    if timeline and not text.startswith("["):
        return f"[{hit.entry.began_at.astimezone(UTC).date().isoformat()}] {text}"  # one zone: the dates in order
    return text


def render(hits: list[ScoredEntry], recent: list[Turn], budget: int | None,
           encoding: str = "cl100k_base", summary: str | None = None,
           timeline: bool = False) -> tuple[str, int, list[ScoredEntry]]:
    """The context text, its token count, and the hits that fit (in the order given) within `budget`.

    Entries come first, in the order given (most relevant first, or oldest first on a `timeline`, each dated); the
    summary of earlier turns (cut to what remains if need be) and the
    recent turns follow while budget remains. An entry that does not
    fit whole is left out (a later, shorter one may still fit), except that the first entry is truncated rather
    than dropped, so a small budget still gets the best memory.
    """
    blocks: list[str] = []
    used = 0
    kept: list[ScoredEntry] = []
    separator = tokens.count("\n\n", encoding)

    def cost(text: str) -> int:
        return tokens.count(text, encoding) + (separator if blocks else 0)

    def fits(text: str) -> bool:
        return budget is None or used + cost(text) <= budget

    def add(text: str) -> None:
        nonlocal used
        used += cost(text)
        blocks.append(text)

    header = TIMELINE_HEADER if timeline else MEMORIES_HEADER
    if hits and fits(header):
        add(header)
        for hit in hits:
            text = block(hit, timeline)
            if fits(text):
                add(text)
                kept.append(hit)
            elif not kept and budget is not None:
                room = budget - used - tokens.count("\n\n", encoding)
                if room > 0:
                    add(tokens.truncate(text, room, encoding))
                    kept.append(hit)
    if summary:
        summed = f"{SUMMARY_HEADER}\n{summary}"
        if fits(summed):
            add(summed)
        elif budget is not None and budget - used - cost(SUMMARY_HEADER) >= MIN_SUMMARY_TOKENS:
            add(tokens.truncate(summed, budget - used - separator, encoding))
    if recent:
        lines = [_turn_line(t) for t in recent]
        # Keep the newest turns when not all fit.
        while lines and not fits("\n".join([RECENT_HEADER, *lines])):
            lines.pop(0)
        if lines:
            add("\n".join([RECENT_HEADER, *lines]))
    text = "\n\n".join(blocks)
    return text, tokens.count(text, encoding) if text else 0, kept
