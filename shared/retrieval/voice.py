"""Whose turns a question in the first person is about: "what did I cook first?", "我先去了哪儿？".

A product asks engram in its user's voice. Such a question names no speaker, yet it is about the user's own turns,
not the assistant's replies around them (which in an assistant chat are most of a window's tokens). So a question in
the first person is read as about the turns of role `user`, unless it may be about the assistant's: it speaks to or
of the assistant ("what did you say", "the bot", "助手", "你说过什么") or of what one is given ("which hotel was
recommended to me", "建议"), or of both of them and their conversation ("in our last chat you…", "我们上次聊到…").
Then nothing is read, and nothing is cut by role: reading too little only costs room.

A request form asks the assistant for help without being about it ("can you remind me…", "do you remember…", "你还
记得…吗", "帮我想想…"), so those words, with their "me", are taken out before either person is looked for. "We"
(us, our, 我们, 我們, 咱们, 我俩) may be both of them: a question about "we" is not cut by role either.
"""
from shared.text import patterns

USER_ROLES = frozenset({"user"})

_FIRST_EN = patterns.compile(r"\b(?:i|me|my|mine|myself|i['’](?:m|ve|d|ll))\b", patterns.IGNORECASE)
_FIRST_ZH = patterns.compile(r"我(?![们們俩倆])")
# The assistant, spoken to or of, what it gave, or the two of them and their conversation ("in our previous chat",
# "我们上次聊到"): then the question may be about its turns.
_ASSISTANT_EN = patterns.compile(
    r"\b(?:you|your|yours|yourself|you['’](?:re|ve|d|ll)|u|ya|assistant|bot|chatbot|ai|"
    r"we|us|our|ours|ourselves|we['’](?:re|ve|d|ll)|conversations?|chats?|chatted|discussion|discussed|"
    r"recommend(?:s|ed|ing|ation|ations)?|suggest(?:s|ed|ing|ion|ions)?|advi[cs]e[ds]?|advising|tips?)\b",
    patterns.IGNORECASE)
_ASSISTANT_ZH = patterns.compile(
    r"[你您妳]|助手|助理|机器人|機器人|推荐|推薦|建议|建議|提议|提議|我们|我們|咱们|咱們|我俩|我倆|聊|对话|對話|讨论|討論")
# The words by which a question asks the assistant for help without being about what it said or did, with the
# "me" they hold ("can you remind me", "你还记得", "帮我想想"): taken out before either person is looked for.
_REQUEST_EN = patterns.compile(
    r"\b(?:(?:can|could|would|will)\s{1,3}you\s{1,3}(?:please\s{1,3})?(?:help\s{1,3}me\s{1,3})?"
    r"(?:remind|tell|help|recall|remember|list|give|show|find|check|look\s{1,3}up|figure\s{1,3}out|work\s{1,3}out)"
    r"(?:\s{1,3}me)?"
    r"|do\s{1,3}you\s{1,3}(?:still\s{1,3})?(?:remember|recall|know|have)"
    r"|(?:please\s{1,3})?(?:remind|tell|help|show)\s{1,3}me"
    r"|thank\s{1,3}you|if\s{1,3}you\s{1,3}(?:can|could|remember)|you\s{1,3}know)\b",
    patterns.IGNORECASE)
_REQUEST_ZH = patterns.compile(
    r"(?:请)?[你您](?:还)?(?:记得|知道|能不能|能|可以|可不可以)(?:帮我|帮忙|提醒我|告诉我)?|"
    r"(?:请)?[你您]?(?:帮我|帮忙|提醒我|告诉我)|请[你您]|谢谢[你您]")


def _without_requests(query: str) -> str:
    return _REQUEST_ZH.sub(" ", _REQUEST_EN.sub(" ", query))


def _first_person(rest: str) -> bool:
    """Whether the question (past its request forms) speaks of its asker (I, my, 我), not only of others or of
    both (we, 我们)."""
    return bool(_FIRST_EN.search(rest) or _FIRST_ZH.search(rest))


def _speaks_of_assistant(rest: str) -> bool:
    """Whether the question (past its request forms) may be about the assistant's turns: it speaks to or of the
    assistant ("what did you say", "the bot", "你推荐的", "助手"), of what one is given ("recommended to me", "建议"),
    or of "we" and their conversation."""
    return bool(_ASSISTANT_EN.search(rest) or _ASSISTANT_ZH.search(rest))


def roles(query: str) -> frozenset[str]:
    """The roles whose turns the question is about: the user's for a question in the first person that does not
    speak of the assistant; none (no reading) otherwise."""
    rest = _without_requests(query)
    return USER_ROLES if _first_person(rest) and not _speaks_of_assistant(rest) else frozenset()
