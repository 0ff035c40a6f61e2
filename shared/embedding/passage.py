"""What of an entry the dense model reads: its text, or, when that is longer than EMBED_CHARS, a share of every turn.

The dense model is given at most EMBED_CHARS characters of an entry. Cutting the text there would hide every turn
after a long one from the dense search: in an assistant chat one 3,000-character reply hides the user's next turn,
where the facts a question asks about usually are. So an episode longer than that, written line by line
(`turn_lines`), is read as its own lines (day headers, the quoted turn before the window) and each turn's beginning,
every turn clipped to the same share (a turn shorter than the share leaves the rest to the others). BM25 reads the
whole text either way.
"""
from collections.abc import Sequence

from shared.embedding.protocol import EMBED_CHARS
from shared.store.model import TurnLines


def _share(lengths: list[int], room: int) -> int:
    """The most characters every turn may keep so that all of them together take at most `room`."""
    left, count = room, len(lengths)
    for length in sorted(lengths):
        if length * count > left:
            return left // count
        left -= length
        count -= 1
    return max(lengths, default=0)


def passage(text: str, turn_lines: Sequence[TurnLines], limit: int = EMBED_CHARS) -> str:
    """The part of an entry's text the dense model reads: all of it when it fits `limit`; else every turn's share
    (with its speaker's name and the entry's own lines), when the turn lines fit the text; else its beginning."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    end = -1
    for span in turn_lines:
        if not end < span.first <= span.last < len(lines):
            return text[:limit]
        end = span.last
    if not turn_lines:
        return text[:limit]
    turns = ["\n".join(lines[span.first:span.last + 1]) for span in turn_lines]
    held = {j for span in turn_lines for j in range(span.first, span.last + 1)}
    own = [line for j, line in enumerate(lines) if j not in held]
    room = limit - sum(len(line) + 1 for line in own) - len(turns)
    if room < 16 * len(turns):  # headers alone (or very many turns) take the room: the beginning is all that fits
        return text[:limit]
    share = _share([len(t) for t in turns], room)
    starts = {span.first: i for i, span in enumerate(turn_lines)}
    out: list[str] = []
    for j, line in enumerate(lines):
        if j in starts:
            out.append(turns[starts[j]][:share])
        elif j not in held:
            out.append(line)
    return "\n".join(out)[:limit]
