"""Relative time phrases become absolute dates, resolved against the turn's own timestamp."""
from datetime import UTC, datetime

import pytest

from shared.compress.dates import annotate, resolve

MONDAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("I went to a support group yesterday.", "yesterday (7 May 2023)"),
    ("We ran a charity race last Saturday.", "last Saturday (6 May 2023)"),
    ("We go camping next month.", "next month (June 2023)"),
    ("Three days ago I painted a sunrise.", "Three days ago (5 May 2023)"),
    ("It was hectic last week.", "last week (the week of 1 May 2023)"),
    ("Last weekend was fun.", "Last weekend (the weekend of 6 May 2023)"),
    ("See you tomorrow!", "tomorrow (9 May 2023)"),
    ("I moved there last year.", "last year (2022)"),
])
def test_english_relative_phrases(text: str, expected: str) -> None:
    """English relative phrases (yesterday, last Saturday, next month, days ago, last week or weekend, tomorrow, last
    year) are annotated with the absolute day, week, month or year they mean."""
    assert expected in annotate(text, "en", MONDAY)[0]


@pytest.mark.parametrize(("text", "expected"), [
    ("我昨天去了北京。", "昨天（2023年5月7日）"),
    ("下周五还要去上海。", "下周五（2023年5月19日）"),
    ("上个月我搬家了。", "上个月（2023年4月）"),
    ("去年我在杭州。", "去年（2022年）"),
])
def test_chinese_relative_phrases(text: str, expected: str) -> None:
    """Chinese relative phrases are annotated, in Chinese, with the absolute day, month or year they mean."""
    assert expected in annotate(text, "zh", MONDAY)[0]


def test_the_base_is_the_turns_own_time() -> None:
    """Relative phrases resolve against the timestamp they are given, not a fixed date."""
    later = datetime(2023, 8, 20, 9, 0, tzinfo=UTC)
    assert "yesterday (19 August 2023)" in annotate("yesterday", "en", later)[0]


def test_words_that_only_look_like_dates_are_left_alone() -> None:
    """Ordinary words such as 'may', 'now', 'second' and 'twice' are neither annotated nor resolved as dates."""
    text = "We may go now, it is the second time. We did it."
    assert annotate(text, "en", MONDAY)[0] == text
    assert resolve("Yes, twice!", "en", MONDAY) == []


def test_resolved_times_keep_the_turns_zone() -> None:
    """A resolved time is timezone-aware and falls on the calendar day the phrase means."""
    [found] = resolve("yesterday", "en", MONDAY)
    assert found.when.tzinfo is not None and found.when.date().isoformat() == "2023-05-07"
