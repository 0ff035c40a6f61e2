"""What the dense model reads of an entry: all of a short one; of a long episode every turn's beginning (a long reply
no longer hides the turns after it), with its headers, within the limit; of anything it cannot place, the text's
beginning."""
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from engram_client.contract import Turn
from shared.compress import OfflineCompressor, Window
from shared.compress.plain import plain_episode
from shared.embedding import EMBED_CHARS
from shared.embedding.passage import passage
from shared.store import TurnLines

T0 = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)


def window(spec: list[tuple[str, str]], hours: int = 0) -> Window:
    """One conversation's turns (speaker, text), a minute (or `hours`) apart."""
    step = timedelta(hours=hours) if hours else timedelta(minutes=1)
    return Window(tenant_id="t", conversation_id="c", turns=[
        Turn(conversation_id="c", turn_id=f"t{i}", speaker=speaker, role="assistant" if speaker == "Bot" else "user",
             text=text, ts=T0 + step * i) for i, (speaker, text) in enumerate(spec)])


def test_a_short_entry_is_read_whole() -> None:
    """An entry within the limit is read as it is, turn lines or not."""
    draft = plain_episode(window([("Mei", "I adopted a beagle."), ("Bot", "Lovely!")]))
    assert passage(draft.text, draft.turn_lines) == draft.text
    assert passage("short fact", []) == "short fact"


def test_a_long_reply_no_longer_hides_the_turns_after_it() -> None:
    """A window whose first reply is 6,000 characters: every turn's beginning is read (the user's turns after the
    reply whole, being short), with the day's header, within the limit; the long replies share the rest."""
    spec = [("Mei", "Morning! I signed up for a pottery course today."), ("Bot", "Centering tips. " * 400),
            ("Mei", "Also: we adopted a beagle called Biscuit from Mrs. Iyer."), ("Bot", "Dog advice. " * 300)]
    draft = OfflineCompressor().compress_sync(window(spec))[0]
    assert len(draft.text) > 3 * EMBED_CHARS
    read = passage(draft.text, draft.turn_lines)
    assert len(read) <= EMBED_CHARS
    assert read.startswith("[Mon 8 May 2023]\nMei: Morning! I signed up for a pottery course today")
    assert "Mei: Also: we adopted a beagle called Biscuit from Mrs. Iyer." in read
    assert draft.text[:EMBED_CHARS].count("Biscuit") == 0  # what the dense model read before: the first reply only
    lines = read.split("\n")
    assert [line.split(":")[0] for line in lines[1:]] == ["Mei", "Bot", "Mei", "Bot"]
    assert abs(len(lines[2]) - len(lines[4])) <= 1  # the two long replies share the room


def test_what_cannot_be_placed_is_read_from_its_beginning() -> None:
    """Without turn lines (a fact, an entry written before them), or with turn lines that do not fit the text, a
    long entry is read from its beginning, as before."""
    text = "x" * (EMBED_CHARS * 2)
    assert passage(text, []) == text[:EMBED_CHARS]
    lines = "\n".join(["[Mon 8 May 2023]", "Mei: " + "a" * 3000, "Bot: " + "b" * 3000])
    for spans in ([TurnLines(speaker="Mei", first=1, last=1), TurnLines(speaker="Bot", first=1, last=2)],
                  [TurnLines(speaker="Mei", first=1, last=9)],
                  [TurnLines(speaker="Bot", first=2, last=2), TurnLines(speaker="Mei", first=1, last=1)]):
        assert passage(lines, spans) == lines[:EMBED_CHARS]


PIECES = ["word ", "长文本", "\n", "[Fri 1 Jan 2021]", "Bot: ", "x" * 700, "y" * 2500]


@settings(max_examples=200, deadline=None)
@given(spec=st.lists(st.tuples(st.sampled_from(["Mei", "Bot", "Ana: B"]),
                               st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join)
                               .filter(lambda s: s.strip() != "")), min_size=1, max_size=8),
       plain=st.booleans(), hours=st.sampled_from([0, 13]), limit=st.sampled_from([200, 800, EMBED_CHARS]))
def test_every_turn_is_read_within_the_limit(spec: list[tuple[str, str]], plain: bool, hours: int,
                                             limit: int) -> None:
    """Whatever the turns hold (newlines, headers, other speakers' lines, any length), written by either compressor
    over one day or several: the passage is within the limit, and when the entry is longer than it and there is room
    for every turn, it holds each turn's first line's beginning (its speaker's name and what follows)."""
    w = window(spec, hours)
    draft = plain_episode(w) if plain else OfflineCompressor().compress_sync(w)[0]
    read = passage(draft.text, draft.turn_lines, limit)
    assert len(read) <= limit
    if len(draft.text) <= limit:
        assert read == draft.text
    elif read != draft.text[:limit]:
        lines = draft.text.split("\n")
        for span in draft.turn_lines:
            assert lines[span.first][:12] in read
