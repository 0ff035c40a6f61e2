"""The multi-session stories (shared/evaluation/data/multihop) hold to what their README says, the split is the one
drawn, and the judge counts evidence and order as the issue defines them."""
from datetime import UTC, datetime, timedelta

import pytest

from shared.evaluation import multihop
from shared.evaluation.multihop import Hit, Key, Question, Story, judge

HALVES = {name: multihop.load(multihop.split_path(name)) for name in ("dev", "test")}


def test_the_halves_are_the_one_split_of_forty_english_and_thirty_chinese_stories() -> None:
    """70 stories in all (40 English, 30 Chinese), the halves disjoint, each half holding half of each language, and
    drawing the split again from the whole set gives the same halves."""
    dev, test = HALVES["dev"], HALVES["test"]
    assert {s.id for s in dev}.isdisjoint({s.id for s in test})
    every = dev + test
    assert sum(s.language == "en" for s in every) == 40 and sum(s.language == "zh" for s in every) == 30
    again = multihop.split(every)
    assert [s.id for s in again[0]] == [s.id for s in dev] and [s.id for s in again[1]] == [s.id for s in test]


def test_every_question_names_turns_that_exist_and_orders_its_events_in_time() -> None:
    """Evidence keys name turns of the story; multi-hop evidence spans sessions; an ordering question's events are
    in the order their turns happened; a single-hop control has one turn."""
    for story in (s for half in HALVES.values() for s in half):
        when = {(s.conversation_id, t.turn_id): t.ts for s in story.sessions for t in s.turns}
        assert 4 <= len(story.sessions) <= 8, story.id
        for q in story.questions:
            keys = [(k.conversation_id, k.turn_id) for k in q.evidence]
            assert all(k in when for k in keys), (story.id, q.id)
            if q.type == "multi_hop":
                assert 2 <= len(keys) <= 4 and len({c for c, _ in keys}) >= 2, (story.id, q.id)
            elif q.type == "ordering":
                times = [when[(k.conversation_id, k.turn_id)] for k in q.order]
                assert len(q.order) == len(keys) and times == sorted(times), (story.id, q.id)
            else:
                assert len(keys) == 1 and q.order == [], (story.id, q.id)


def _story(order: list[Key]) -> tuple[Story, Question]:
    story = HALVES["dev"][0]
    question = Question(id="q", type="ordering", question="which first?", asked_at=datetime(2025, 1, 1, tzinfo=UTC),
                        answer="", evidence=order, order=order)
    return story, question


def test_the_judge_needs_every_evidence_turn_and_the_events_in_order() -> None:
    """All evidence found only when every turn is a source of a returned entry (of its conversation); an ordering
    question is in order only when the entries holding its events come in the events' order."""
    a, b = Key(conversation_id="c1", turn_id="3"), Key(conversation_id="c2", turn_id="1")
    story, question = _story([a, b])
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    first, second = (Hit(conversation_id="c1", turn_ids=["2", "3"], occurred_at=t0),
                     Hit(conversation_id="c2", turn_ids=["1"], occurred_at=t0 + timedelta(days=3)))
    right = judge(story, question, [first, second], 100)
    assert right.all_found and right.in_order and right.found == 2
    assert judge(story, question, [second, first], 100).in_order is False
    wrong_conversation = Hit(conversation_id="c3", turn_ids=["1"], occurred_at=t0)
    half = judge(story, question, [first, wrong_conversation], 100)
    assert half.found == 1 and half.first_found and not half.all_found and half.in_order is False
    figures = multihop.figures([right, half])
    assert figures.all_evidence == 0.5 and figures.turn_recall == 0.75 and figures.in_order == 0.5


def test_the_crowded_variant_puts_every_few_stories_of_a_language_under_one_user() -> None:
    """Crowds of 4: each story keeps its sessions and questions, shares its user with at most three others of its
    language and with none of the other language; a crowd of 1 is the set as it is; a crowd of 0 is refused."""
    test = HALVES["test"]
    crowded = multihop.crowded(test, 4)
    assert sorted(s.id for s in crowded) == sorted(s.id for s in test)
    by_id = {s.id: s for s in test}
    users: dict[str, set[str]] = {}
    for story in crowded:
        assert story.sessions == by_id[story.id].sessions and story.questions == by_id[story.id].questions
        users.setdefault(story.user.user_id, set()).add(story.id)
    for ids in users.values():
        assert 1 <= len(ids) <= 4 and len({by_id[i].language for i in ids}) == 1
    assert sum(len(ids) == 4 for ids in users.values()) >= len(test) // 4 - 2
    assert [s.user for s in sorted(multihop.crowded(test, 1), key=lambda s: s.id)] == \
           [s.user for s in sorted(test, key=lambda s: s.id)]
    with pytest.raises(ValueError, match="at least one"):
        multihop.crowded(test, 0)


def test_distractor_sessions_are_added_to_their_story_and_nothing_else() -> None:
    """A story's distractor sessions come after its own, its questions unchanged; distractors of an unknown story,
    a story without any, or a session reusing one of the story's conversations are refused."""
    story = HALVES["dev"][0]
    extra = [s.model_copy(update={"conversation_id": f"{story.id}-d{i}"}) for i, s in enumerate(story.sessions[:2])]
    added = multihop.with_distractors([story], [multihop.Distractors(story=story.id, sessions=extra)])
    assert added[0].sessions == [*story.sessions, *extra] and added[0].questions == story.questions
    with pytest.raises(ValueError, match="do not match"):
        multihop.with_distractors([story], [multihop.Distractors(story="elsewhere", sessions=extra)])
    with pytest.raises(ValueError, match="do not match"):
        multihop.with_distractors([story], [])
    with pytest.raises(ValueError, match="reuse"):
        multihop.with_distractors([story], [multihop.Distractors(story=story.id, sessions=story.sessions[:1])])


def test_every_story_has_four_distractor_sessions_of_its_own_people_inside_its_time() -> None:
    """Each half's distractors: one line per story and no other, four sessions `<story>-d1..4` of 6-12 turns each,
    spoken by the story's own speakers in their roles, between the story's first and last turn, copying no turn."""
    for name, stories in HALVES.items():
        distractors = multihop.load_distractors(multihop.distractors_path(name))  # type: ignore[arg-type]
        assert sorted(d.story for d in distractors) == sorted(s.id for s in stories), name
        by_story = {d.story: d for d in distractors}
        for story in stories:
            own = [t for s in story.sessions for t in s.turns]
            voices = {(t.speaker, t.role) for t in own}
            first, last = min(t.ts for t in own), max(t.ts for t in own)
            texts = {t.text for t in own}
            added = by_story[story.id].sessions
            assert [s.conversation_id for s in added] == [f"{story.id}-d{i}" for i in range(1, 5)]
            for session in added:
                assert 6 <= len(session.turns) <= 12, session.conversation_id
                assert all((t.speaker, t.role) in voices for t in session.turns), session.conversation_id
                assert all(first < t.ts < last for t in session.turns), session.conversation_id
                assert not texts & {t.text for t in session.turns}, session.conversation_id


def test_the_first_person_variant_asks_every_question_in_its_users_voice() -> None:
    """Each half's first-person questions: exactly one for every question of the half, in the user's voice (it no
    longer names the user), and the variant swaps only the question's text (evidence, order and type unchanged);
    a rewrite of no question, or a question without one, is refused."""
    for name, stories in HALVES.items():
        rewrites = multihop.load_rewrites(multihop.first_person_path(name))  # type: ignore[arg-type]
        assert [(r.story, r.question) for r in rewrites] == [(s.id, q.id) for s in stories for q in s.questions]
        asked = multihop.in_first_person(stories, rewrites)
        for before, after in zip(stories, asked, strict=True):
            for old, new in zip(before.questions, after.questions, strict=True):
                assert new.model_copy(update={"question": old.question}) == old
                assert before.user.name not in new.question, new.question
    story = HALVES["dev"][0]
    with pytest.raises(ValueError, match="do not match"):
        multihop.in_first_person([story], [])
    extra = multihop.Rewrite(story=story.id, question="q999", text="What did I do?")
    with pytest.raises(ValueError, match="do not match"):
        multihop.in_first_person([story], [*rewrites_of(story), extra])


def rewrites_of(story: Story) -> list[multihop.Rewrite]:
    """A rewrite of each of the story's questions (its own text)."""
    return [multihop.Rewrite(story=story.id, question=q.id, text=q.question) for q in story.questions]


def test_the_verbose_variant_lengthens_only_the_assistants_turns() -> None:
    """Every assistant turn of a half reaches the length asked for, with other stories' replies of its language
    (never its own story's); the user's turns, the friend chats, the ids, times, questions and evidence stay."""
    stories = HALVES["dev"]
    long = multihop.verbose(stories, 1500)
    assert [s.id for s in long] == sorted(s.id for s in stories)
    by_id = {s.id: s for s in stories}
    for story in long:
        before = by_id[story.id]
        assert story.questions == before.questions and story.user == before.user
        own = {t.text for s in before.sessions for t in s.turns}
        for old_session, new_session in zip(before.sessions, story.sessions, strict=True):
            for old, new in zip(old_session.turns, new_session.turns, strict=True):
                assert (new.turn_id, new.ts, new.role, new.speaker) == (old.turn_id, old.ts, old.role, old.speaker)
                if old.role == "user":
                    assert new.text == old.text
                else:
                    assert len(new.text) >= 1500 and new.text.startswith(old.text)
                    assert not own & {new.text[len(old.text):].strip()}
