"""A question in its asker's voice ("what did I…", "我…") is about the user's turns; one that may be about the
assistant's (spoken to or of, "the bot", "助手", or what it gave, "recommended to me", "建议"), or about both people
("we", "我们", "我們") is not read, nor is one about others. Request forms that only ask the assistant for help ("can
you remind me", "你还记得") count neither as speaking of it nor, with their "me", as the first person."""
from datetime import UTC, datetime

import pytest

from shared.retrieval import voice
from shared.retrieval.plan import plan

NOW = datetime(2023, 9, 1, tzinfo=UTC)

ABOUT_THE_USER = [
    "What did I cook first, the risotto or the curry?",
    "Which city did I go to with the friend I met at my pottery course?",
    "Can you remind me which city I went to with my friend?",
    "Could you please tell me how much I paid for my course?",
    "Do you remember my sister's name?",
    "I'm trying to recall when I moved — can you help me figure out the month?",
    "Remind me: what did I name my cat?",
    "我先去了哪座山，后去了哪座山？",
    "你还记得我妈妈的生日吗？",
    "帮我想想我上个月买了什么？",
    "请你告诉我，我的车是什么时候修的？",
    "你能不能提醒我一下我报的课多少钱？",
]
NOT_READ = [
    "What did you recommend I read next?",
    "Can you remind me which hotel was recommended for Lisbon?",
    "What hotel did the assistant suggest to me?",
    "Which tips did the bot give me about sleep?",
    "助手给我推荐了哪家酒店？",
    "我們上次聊了什麼？",
    "我俩上次去哪儿吃的饭？",
    "妳上次說我應該怎麼做？",
    "Remind me which book the club read at Christmas?",
    "I'm going back to our previous conversation about dinosaurs. Can you remind me what color the Plesiosaur was?",
    "In our last chat I asked about a hotel in Lisbon; which one was it?",
    "Which dog did we adopt?",
    "我们上次聊到我想去哪儿旅行？",
    "上次聊天时我问的那家酒店叫什么？",
    "Which restaurant did you suggest for my birthday?",
    "What did we talk about last week?",
    "Which city did Mei visit first?",
    "What is your name?",
    "How many times did I tell you about my dog?",
    "你推荐我看什么书？",
    "我们上次聊了什么？",
    "咱们上次说到哪儿了？",
    "李雷在西湖边做了什么？",
    "你上次说我应该怎么做？",
]


@pytest.mark.parametrize("question", ABOUT_THE_USER)
def test_a_question_in_the_askers_voice_is_about_the_users_turns(question: str) -> None:
    """I / my / 我, with or without a request form addressed to the assistant: the user's turns, and the one plan
    says so."""
    assert voice.roles(question) == {"user"}
    assert plan(question, NOW).roles == {"user"}


@pytest.mark.parametrize("question", NOT_READ)
def test_a_question_about_the_assistant_both_people_or_others_is_not_read(question: str) -> None:
    """Speaking of the assistant (you / your / 你 past a request form), of both people (we, 我们, 咱们), or only of
    others: no reading, so nothing is cut by role."""
    assert voice.roles(question) == frozenset()
    assert plan(question, NOW).roles == frozenset()


def test_long_hostile_questions_are_read_in_linear_time() -> None:
    """Fifty thousand characters of near-matches (request forms without an end, "you" and "I" run together) are
    read at once: the patterns are linear (shared/text/patterns.py refuses any that is not)."""
    expected = {"can you " * 6000: frozenset(), "you'" * 12000: frozenset(), "我们" * 25000: frozenset(),
                "请你还" * 16000: frozenset(), "remind me " * 5000: frozenset(), "i'm " * 12000: {"user"},
                "我的" * 25000: {"user"}, "can you remind me what i " * 2000: {"user"}}
    assert {text: voice.roles(text) for text in expected} == expected
