"""Whose turns a question in the first person is about: "what did I cook first?", "我先去了哪儿？".

A product asks engram in its user's voice. Such a question names no speaker, yet it is about the user's own turns,
not the assistant's replies around them (which in an assistant chat are most of a window's tokens). So a question in
the first person is read as about the turns of role `user`, unless it also speaks of the assistant ("what did you
recommend", "你说过什么"): then it is about both, and nothing is read.

A request form addresses the assistant without being about it ("can you remind me…", "do you remember…", "你还记得…
吗", "你能帮我…"), so those words are taken out before the second person is looked for. "We" (我们, 咱们) is both
people: it is neither first nor second person here.
"""
from shared.text import patterns

USER_ROLES = frozenset({"user"})

_FIRST_EN = patterns.compile(r"\b(?:i|me|my|mine|myself|i['’](?:m|ve|d|ll))\b", patterns.IGNORECASE)
_SECOND_EN = patterns.compile(r"\b(?:you|your|yours|yourself|you['’](?:re|ve|d|ll))\b", patterns.IGNORECASE)
# The words by which a question asks the assistant for help without being about what it said or did.
_REQUEST_EN = patterns.compile(
    r"\b(?:(?:can|could|would|will)\s{1,3}you\s{1,3}(?:please\s{1,3})?(?:help\s{1,3}me\s{1,3})?"
    r"(?:remind|tell|help|recall|remember|list|give|show|find|check|look\s{1,3}up|figure\s{1,3}out|work\s{1,3}out)"
    r"|do\s{1,3}you\s{1,3}(?:still\s{1,3})?(?:remember|recall|know|have)"
    r"|(?:thank\s{1,3}you|if\s{1,3}you\s{1,3}(?:can|could|remember)|you\s{1,3}know))\b",
    patterns.IGNORECASE)
_FIRST_ZH = patterns.compile(r"我(?:[^们]|$)")
_SECOND_ZH = patterns.compile(r"[你您]")
_REQUEST_ZH = patterns.compile(
    r"(?:请)?[你您](?:还)?(?:记得|知道|能不能|能|可以|可不可以|帮我|帮忙)|请[你您]|谢谢[你您]")


def first_person(query: str) -> bool:
    """Whether the question speaks of its asker (I, my, 我), not only of others or of both (we, 我们)."""
    return bool(_FIRST_EN.search(query) or _FIRST_ZH.search(query))


def addresses_assistant(query: str) -> bool:
    """Whether the question speaks of the assistant ("what did you say", "你推荐的"), past the request forms that
    only ask it for help ("can you remind me", "你还记得")."""
    rest = _REQUEST_ZH.sub(" ", _REQUEST_EN.sub(" ", query))
    return bool(_SECOND_EN.search(rest) or _SECOND_ZH.search(rest))


def roles(query: str) -> frozenset[str]:
    """The roles whose turns the question is about: the user's for a question in the first person that does not
    speak of the assistant; none (no reading) otherwise."""
    return USER_ROLES if first_person(query) and not addresses_assistant(query) else frozenset()
