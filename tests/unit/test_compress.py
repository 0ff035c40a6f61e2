"""The offline compressor writes self-contained, dated entries that keep who said what."""
import threading
from datetime import UTC, datetime

import pytest

from shared.compress import IMAGE_CAPTION_KEY, Draft, OfflineCompressor, Window
from tests.support.turns import conversation, make_turn


def compress(window: Window) -> str:
    [draft] = OfflineCompressor().compress_sync(window)
    return draft.text


def test_entry_names_each_speaker_and_the_absolute_date() -> None:
    """An entry opens with the window's date, prefixes each line with its speaker, resolves relative dates to absolute
    ones, and carries the source turns, persons, entities, time and episodic kind."""
    turns = conversation([("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
                          ("Melanie", "That's great! I painted a sunrise last Saturday.")])
    window = Window(tenant_id="t", conversation_id="c1", turns=turns)
    [draft] = OfflineCompressor().compress_sync(window)
    assert draft.text.splitlines()[0] == "[Mon 8 May 2023]"
    assert "Caroline: I went to a LGBTQ support group yesterday (7 May 2023)" in draft.text
    assert "Melanie: That's great! I painted a sunrise last Saturday (6 May 2023)." in draft.text
    assert draft.source_turn_ids == [t.turn_id for t in turns]
    assert draft.persons[:2] == ["Caroline", "Melanie"]
    assert "LGBTQ" in draft.entities
    assert draft.occurred_at == turns[0].ts
    assert draft.kind == "episodic"


def test_a_short_reply_keeps_the_question_it_answers() -> None:
    """A short reply that opens a window is written together with the quoted context turn it answers."""
    turns = conversation([("Melanie", "Have you been to the Pride parade in Boston?"), ("Caroline", "Yes, twice!")])
    window = Window(tenant_id="t", conversation_id="c1", turns=[turns[1]], context=[turns[0]])
    text = compress(window)
    assert "(before: Melanie: Have you been to the Pride parade in Boston?)" in text
    assert "Caroline: Yes, twice!" in text


def test_context_turns_are_quoted_but_not_sources() -> None:
    """Context turns quoted in an entry are not listed among its source turn ids."""
    turns = conversation([("A", "Where did you go?"), ("B", "To the lake."), ("A", "Nice.")])
    window = Window(tenant_id="t", conversation_id="c1", turns=turns[1:], context=turns[:1])
    [draft] = OfflineCompressor().compress_sync(window)
    assert draft.source_turn_ids == [turns[1].turn_id, turns[2].turn_id]


def test_people_named_in_the_text_are_persons() -> None:
    """People named in a turn's text join the speaker in the entry's persons, with places as entities and activities as
    keywords."""
    window = Window(tenant_id="t", conversation_id="c1",
                    turns=[make_turn("I went hiking with my friend Jolene in Yosemite.", speaker="Ana")])
    [draft] = OfflineCompressor().compress_sync(window)
    assert draft.persons == ["Ana", "Jolene"]
    assert "Yosemite" in draft.entities
    assert "hiking" in draft.keywords


def test_a_window_over_two_days_dates_each_day() -> None:
    """A window spanning two days gets a date header for each day, and a relative date resolves against its own turn's
    day."""
    first = make_turn("See you tomorrow!", ts=datetime(2023, 5, 8, 22, 0, tzinfo=UTC))
    second = make_turn("Morning! Today I start the new job.", ts=datetime(2023, 5, 9, 8, 0, tzinfo=UTC))
    text = compress(Window(tenant_id="t", conversation_id="c1", turns=[first, second]))
    assert "[Mon 8 May 2023]" in text and "[Tue 9 May 2023]" in text
    assert "tomorrow (9 May 2023)" in text


def test_shared_images_are_described() -> None:
    """An image caption in a turn's metadata appears in the entry as a description of the shared photo."""
    turn = make_turn("Look what I made!", metadata={IMAGE_CAPTION_KEY: "a painting of a sunset over a lake"})
    assert "[shares a photo: a painting of a sunset over a lake]" in compress(
        Window(tenant_id="t", conversation_id="c1", turns=[turn]))


def test_chinese_window() -> None:
    """A Chinese window gets a Chinese date header, inline absolute dates for relative expressions, its speakers as
    persons and place names as keywords."""
    turns = conversation([("李雷", "我昨天去了北京的咖啡馆，下周五还要去上海。"), ("韩梅梅", "真好！你在北京见了谁？")])
    [draft] = OfflineCompressor().compress_sync(Window(tenant_id="t", conversation_id="c1", turns=turns))
    assert draft.text.splitlines()[0] == "[2023年5月8日]"
    assert "李雷: 我昨天（2023年5月7日）去了北京的咖啡馆，下周五（2023年5月19日）还要去上海。" in draft.text
    assert draft.persons == ["李雷", "韩梅梅"]
    assert "北京" in draft.keywords


def test_compression_is_deterministic() -> None:
    """Compressing the same window twice, with separate compressors, yields identical drafts."""
    turns = conversation([("A", "We adopted a puppy last week."), ("B", "What's its name?"), ("A", "Biscuit!")])
    window = Window(tenant_id="t", conversation_id="c1", turns=turns)
    assert OfflineCompressor().compress_sync(window) == OfflineCompressor().compress_sync(window)


def test_a_long_opening_turn_needs_no_quoted_context() -> None:
    """A window whose first turn is long enough to stand on its own does not quote its context turn."""
    long_answer = "We drove up to the lake house on Friday and stayed the whole weekend with my cousins."
    turns = conversation([("A", "Where did you go?"), ("B", long_answer)])
    text = compress(Window(tenant_id="t", conversation_id="c1", turns=turns[1:], context=turns[:1]))
    assert "before:" not in text


async def test_compression_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Date parsing and extraction are CPU work: they must not hold up the loop that answers recalls."""
    threads: list[int] = []
    compressor = OfflineCompressor()
    original = compressor.compress_sync

    def recording(window: Window) -> list[Draft]:
        threads.append(threading.get_ident())
        return original(window)

    monkeypatch.setattr(compressor, "compress_sync", recording)
    window = Window(tenant_id="t", conversation_id="c1", turns=[make_turn("I moved to Lisbon yesterday.")])
    [draft] = await compressor.compress(window)
    assert "yesterday (7 May 2023)" in draft.text
    assert threads and threads[0] != threading.get_ident()
