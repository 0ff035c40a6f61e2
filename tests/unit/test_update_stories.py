"""The update stories (issue 20's evaluation set) hold what their README promises, and the judge that turns a
recall into "old above current", "top holds current" and "stale profile line" counts what it says."""
from datetime import UTC, datetime
from typing import get_args

import pytest

from shared.evaluation import updates
from shared.evaluation.updates import (
    Judged,
    Question,
    Story,
    figures,
    judge,
    profile_holds_current,
    stale_profile_lines,
)

HALVES = get_args(updates.Split)


def _stories(split: updates.Split) -> list[Story]:
    return updates.load(updates.split_path(split))


def _said(story: Story) -> list[str]:
    return [t.text.casefold() for s in story.sessions for t in s.turns]


@pytest.mark.parametrize("split", HALVES)
def test_every_half_parses_and_asks_one_question_of_each_kind_after_its_last_turn(split: updates.Split) -> None:
    """Each story has a present, a past and an unchanged question, asked after its last turn, with answers."""
    stories = _stories(split)
    assert stories
    for story in stories:
        assert sorted(q.kind for q in story.questions) == ["past", "present", "unchanged"], story.id
        last = max(t.ts for s in story.sessions for t in s.turns)
        for question in story.questions:
            assert question.asked_at > last, (story.id, question.kind)
            assert question.current if question.kind == "present" else question.expect, (story.id, question.kind)


@pytest.mark.parametrize("split", HALVES)
def test_every_answer_is_said_in_its_story_and_current_and_old_never_contain_each_other(split: updates.Split) -> None:
    """Answers match as case-folded substrings, so each must occur in a turn, and a current spelling inside an old
    one (or the reverse) would count one value as both."""
    for story in _stories(split):
        said = _said(story)
        for question in story.questions:
            for value in question.current + question.old + question.expect:
                assert any(value.casefold() in text for text in said), (story.id, value)
            for current in question.current:
                for old in question.old:
                    assert current.casefold() not in old.casefold() and old.casefold() not in current.casefold()


def test_no_story_user_conversation_or_turn_is_in_two_places() -> None:
    """Ids are unique across every half: a run publishes a half into one tenant, and the halves never overlap."""
    stories = [s for split in HALVES for s in _stories(split)]
    assert len({s.id for s in stories}) == len(stories)
    assert len({s.user.user_id for s in stories}) == len(stories)
    conversations = [c.conversation_id for s in stories for c in s.sessions]
    assert len(set(conversations)) == len(conversations)
    turns = [(c.conversation_id, t.turn_id) for s in stories for c in s.sessions for t in c.turns]
    assert len(set(turns)) == len(turns)


def test_the_one_split_is_what_dev_and_test_hold() -> None:
    """Drawing the split again from both halves with its seed gives the committed halves back, half of each
    language in each: the split was made once and never re-drawn."""
    dev, test = _stories("dev"), _stories("test")
    again_dev, again_test = updates.split(sorted(dev + test, key=lambda s: s.id))
    assert [s.id for s in again_dev] == [s.id for s in dev] and [s.id for s in again_test] == [s.id for s in test]
    for language in ("en", "zh"):
        assert abs(sum(s.language == language for s in dev) - sum(s.language == language for s in test)) <= 1


STORY = Story.model_validate({
    "id": "x-1", "language": "en", "category": "home", "change": "explicit",
    "user": {"user_id": "u-x-1", "name": "Lena"},
    "sessions": [{"conversation_id": "c1", "turns": [
        {"turn_id": "t1", "speaker": "Lena", "role": "user", "text": "I live in Vienna", "ts": "2024-01-01T10:00:00Z"},
        {"turn_id": "t2", "speaker": "Lena", "role": "user", "text": "moved to Graz", "ts": "2024-06-01T10:00:00Z"}]}],
    "questions": [
        {"kind": "present", "query": "Where does Lena live?", "asked_at": "2024-07-01T10:00:00Z",
         "current": ["Graz"], "old": ["Vienna"]},
        {"kind": "past", "query": "Where did Lena live before?", "asked_at": "2024-07-01T10:00:00Z",
         "expect": ["Vienna"]},
        {"kind": "unchanged", "query": "What is Lena's dog called?", "asked_at": "2024-07-01T10:00:00Z",
         "expect": ["Bruno"]}]})
PRESENT, PAST, UNCHANGED = STORY.questions


def test_an_old_value_above_the_current_one_or_alone_counts_against_the_ranking() -> None:
    """The first entry holding an old value and not the current one is the old rank; an entry naming both values
    ("moved from Vienna to Graz") holds the current one."""
    kinds = ["episodic"] * 3
    above = judge(STORY, PRESENT, ["lived in vienna", "now in GRAZ", "other"], kinds)
    assert (above.current_rank, above.old_rank, above.old_above, above.top) == (2, 1, True, False)
    both = judge(STORY, PRESENT, ["moved from Vienna to Graz", "Vienna"], kinds[:2])
    assert (both.current_rank, both.old_rank, both.old_above, both.top) == (1, 2, False, True)
    alone = judge(STORY, PRESENT, ["Vienna", "other"], kinds[:2])
    assert alone.current_rank is None and alone.old_above
    neither = judge(STORY, PRESENT, ["other"], kinds[:1])
    assert not neither.old_above and not neither.top
    past = judge(STORY, PAST, ["Graz", "Vienna"], kinds[:2])
    assert (past.current_rank, past.old_rank) == (2, None)


def _numbers(current: str, old: str) -> Story:
    return STORY.model_copy(update={"questions": [Question(
        kind="present", query="How many testers now?", asked_at=datetime(2024, 7, 1, tzinfo=UTC), current=[current],
        old=[old])]})


def test_a_number_is_found_only_whole_and_a_word_also_inflected() -> None:
    """"20" is not in "2023" nor "3.1" in "3.12" (a longer number is another number); "Wednesday" is in
    "Wednesdays"."""
    kinds = ["episodic"] * 2
    counts = judge(_numbers("45", "20"), _numbers("45", "20").questions[0],
                   ["[Sat 12 August 2023] we are 45 testers", "in 2023 we had 20 testers"], kinds)
    assert (counts.current_rank, counts.old_rank) == (1, 2)
    assert judge(_numbers("45", "20"), _numbers("45", "20").questions[0], ["2023", "145 and 4.5"], kinds).old_rank \
        is None
    version = _numbers("3.11", "3.1")
    assert judge(version, version.questions[0], ["on Python 3.12", "back on 3.1."], kinds).old_rank == 2
    assert judge(_numbers("1,200", "200"), _numbers("1,200", "200").questions[0], ["11,200", "1,200"],
                 kinds).current_rank == 2
    day = _numbers("Wednesday", "Monday")
    assert judge(day, day.questions[0], ["Wednesdays at 7pm"], kinds[:1]).current_rank == 1


def test_a_profile_line_stating_a_replaced_value_is_stale_and_its_headers_are_not_read() -> None:
    """Lines stating something (not the "as of" header of each person) that name a replaced value are stale; a
    number in a line's date is not the value."""
    profile = "Profile of Lena, as of 1 June 2024 (Vienna time)\n- Lena lives in Graz\n- Lena's dog is Bruno"
    assert stale_profile_lines(STORY, profile) == []
    stale = stale_profile_lines(STORY, profile + "\n- Lena lives in Vienna (stated 2 May 2024)")
    assert stale == ["- Lena lives in Vienna"]
    assert stale_profile_lines(STORY, profile + "\nProfile of Vienna's mayor (as of 1 June 2024):") == []
    dated = "Profile of Lena (as of 20 May 2023):\n- Lena works at Acme (stated 20 May 2023)"
    assert stale_profile_lines(_numbers("45", "20"), dated) == []
    assert stale_profile_lines(_numbers("45", "2"), dated) == []
    assert stale_profile_lines(STORY, None) == []
    overlapping = STORY.model_copy(update={"questions": [Question(
        kind="present", query="q", asked_at=datetime(2024, 7, 1, tzinfo=UTC), current=["New York"], old=["York"])]})
    assert stale_profile_lines(overlapping, "header\n- lives in New York") == []


def test_a_profile_holds_the_current_value_when_a_line_after_its_header_states_it() -> None:
    """How much of what holds the profile still says: a line after the header naming the present question's current
    value; the header and other lines do not count."""
    assert profile_holds_current(STORY, "Profile of Lena\n- Lena lives in Graz")
    assert not profile_holds_current(STORY, "Profile of Lena (Graz)\n- Lena's dog is Bruno")
    assert not profile_holds_current(STORY, None)
    judged = [_judged("present", 1), _judged("present", 2, language="zh")]
    got = figures(judged, {}, k=10, profile_current=[judged[1].story, "another story"])
    assert (got.stories, got.profiles_current) == (2, 1)


def _judged(kind: str, current: int | None, old: int | None = None, language: str = "en") -> Judged:
    return Judged(story=f"s{current}{old}{kind}{language}", language=language, change="explicit", category="home",
                  kind=kind, query="q", current_rank=current, old_rank=old)


def test_figures_are_shares_of_each_kind_of_question() -> None:
    """Old above and top current are shares of present questions; past and unchanged are found within k."""
    judged = [_judged("present", 1), _judged("present", 3, 2), _judged("present", None, 4), _judged("present", 2),
              _judged("past", 4), _judged("past", 11), _judged("unchanged", 1), _judged("unchanged", None),
              _judged("unchanged", 3), _judged("unchanged", 4)]
    stale = {judged[1].story: ["- lives in Vienna"]}
    got = figures(judged, stale, k=10)
    assert (got.present, got.old_above, got.top_current) == (4, 0.5, 0.25)
    assert (got.past, got.past_at_k, got.unchanged, got.unchanged_at_k) == (2, 0.5, 4, 0.75)
    assert (got.unchanged_top, got.unchanged_top3) == (0.25, 0.5)
    assert got.stale_profiles == 1 and got.stories == 10
