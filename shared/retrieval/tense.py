"""Which time a question asks about: the present (the newest evidence answers it), an earlier state ("before",
"以前"), or a past event ("when did she move?"), read from its grammar words and time words, not its topic.

Only function words and time adverbs are looked at, in English and Chinese, so the reading holds for any subject:
"where does Lena live", "what is the p95 latency of checkout", "how many beta testers are there" and
"小王现在在哪儿上班" are all about the present; "where did Lena live before?" and "修复之前延迟是多少" ask for an
earlier state; "when did she move?" asks for an event, which recency must not decide.
"""
from dataclasses import dataclass
from typing import Literal

from shared.text import patterns

Orientation = Literal["present", "earlier", "event"]

# An earlier state is asked for by name: these words point before the current one.
_EARLIER_EN = patterns.compile(
    r"\b(?:before|previous(?:ly)?|former(?:ly)?|used\s++to|originally|original|initial(?:ly)?|at\s++first|"
    r"first\s++(?:one|place|job|home|city)|earlier|prior|back\s++then|back\s++when|"
    r"in\s++the\s++past|ex)\b", patterns.IGNORECASE)
# 过去 after a verb is a direction ("搬过去", "over there"), 原来如此 is "I see".
_EARLIER_ZH = patterns.compile(r"之前|以前|原来(?!如此)|原先|本来|曾经|(?<![搬走跑飞开去回送拿带过])过去|当初|当时|"
                               r"起初|最初|一开始|从前|以往|早先|"
                               r"上一[个份任家]|前任")
# The present is asked for by name, or by the tense of the question.
_NOW_EN = patterns.compile(
    r"\b(?:now|nowadays|currently|current|these\s++days|at\s++the\s++moment|at\s++present|still|today|latest|"
    r"lately|recently|most\s++recent|new|present|anymore|"
    r"this\s++(?:year|month|week|weekend|summer|winter|spring|autumn|fall|season|term|semester|quarter))\b",
    patterns.IGNORECASE)
_NOW_ZH = patterns.compile(r"现在|目前|如今|眼下|当前|最近|这阵子|这段时间|近来|还在|仍然|依然|最新|新的")
_PAST_AUX_EN = patterns.compile(r"\b(?:did|was|were|had|went|happened|ago|last\s++(?:year|month|week|time))\b",
                                patterns.IGNORECASE)
_PRESENT_AUX_EN = patterns.compile(r"\b(?:is|are|am|does|do|has|have)\b|\b(?:what|where|who|how|which|when|that|it|"
                                   r"there|he|she)['’]s\b|['’]re\b", patterns.IGNORECASE)
_EVENT_ZH = patterns.compile(r"什么时候|哪天|何时|哪一年|几月|多久以前")


@dataclass(frozen=True)
class Reading:
    """What time a query asks about, the words that said so (for `explain`), and whether a time word said it
    ("now", "before", "现在") rather than the tense alone: someone who says "now" expects that things changed."""

    orientation: Orientation
    cue: str
    explicit: bool = True


def _first(pattern: patterns.Pattern, text: str) -> str | None:
    found = pattern.search(text)
    return found.group(0).strip() if found else None


def topic(query: str) -> str:
    """The query without its words for the present ("now", "currently", "现在") and Chinese words for earlier
    ("以前"): they say when, not what, and as search terms they match every window that happens to say "now" (an
    English stopword, not a Chinese one). English words for earlier stay: "ex" or "first job" are also the topic."""
    stripped = query
    for pattern in (_NOW_ZH, _EARLIER_ZH, _NOW_EN):
        stripped = pattern.sub(" ", stripped)
    return stripped if stripped.strip(" ?？!！。.,，") else query


def read(query: str, lang: str) -> Reading:
    """The query's orientation: `earlier` when it names a time before the current state, `event` when it asks about
    a past happening, else `present` (what is true now, the default of a question in the present tense)."""
    if lang == "zh":
        if cue := _first(_NOW_ZH, query):  # "原来如此，她现在住哪": the present, said outright, wins
            return Reading("present", cue)
        if cue := _first(_EARLIER_ZH, query):
            return Reading("earlier", cue)
        if cue := _first(_EVENT_ZH, query):
            return Reading("event", cue)
        return Reading("present", "no time word (a question about how things are)", explicit=False)
    if cue := _first(_EARLIER_EN, query):
        return Reading("earlier", cue)
    if cue := _first(_NOW_EN, query):
        return Reading("present", cue)
    if cue := _first(_PAST_AUX_EN, query):
        return Reading("event", cue)
    if cue := _first(_PRESENT_AUX_EN, query):
        return Reading("present", f"present tense ({cue})", explicit=False)
    return Reading("present", "no past-tense word", explicit=False)


# The order of events is asked for by these words: "in what order", "the order these happened in", "the order of
# these", "which came first", "before or after", "put these in order", "先…还是先…", "先…后…" (not 后来 "later",
# 后悔, 后面, 后天, 后果), "先后", "顺序", "之前还是之后".
# A question that only names an earlier state ("where did she live before?"), says "first" of a thing ("her first
# job", "who finished first?"), or asks what happened at a time ("what did you do last summer?", "then?") asks for
# no order.
_SEQUENCE_EN = patterns.compile(
    r"\b(?:in\s{1,3}(?:what|which)\s{1,3}(?:order|sequence)|"
    r"(?:put|list|arrange|sort|rank)\b[^.?!]{0,60}?\bin\s{1,3}(?:chronological\s{1,3}|time\s{1,3})?order|"
    r"in\s{1,3}(?:chronological|time)\s{1,3}order|chronologically|order\s{1,3}of\s{1,3}events|"
    r"sequence\s{1,3}of\s{1,3}events|timeline\s{1,3}of|"
    r"the\s{1,3}order\s{1,3}(?:of\s{1,3}(?:these|those|the\s{1,3}(?:events|following|things))|(?:in\s{1,3}which\s{1,3})?"
    r"(?:these|those|they|things|events)\s{1,3}(?:happened|occurred|took\s{1,3}place|came))|"
    r"(?:what|which)\s{1,3}order\s{1,3}(?:did|do)\s{1,3}(?:these|those|they|the\s{1,3}(?:events|following|things))|"
    r"(?:what|which|the)\s{1,3}order\b[^.?!]{0,80}?\bin(?=\s{0,3}[?？])|"
    r"before\s{1,3}or\s{1,3}after|after\s{1,3}or\s{1,3}before|earlier\s{1,3}or\s{1,3}later|first\s{1,3}or\b|"
    r"(?:came|happened|occurred|started|began|did\s{1,3}\S{1,30}\s{1,3}do)\s{1,3}first)\b",
    patterns.IGNORECASE)
# 先 as "first" (not 先生 "Mr.", 先进 "advanced", 先锋, 先天, 祖先 "ancestor", 首先 "firstly", 优先, 原先 ...).
_XIAN = r"(?<![首原优率领争预事祖])先(?![生前进锋天知辈驱例])"
# …然后/接着/再… as "then": in the same clause as 先, or opening a later one, or after a 后 ("待了一周后再去了哪");
# "先别急，他再婚了吗？" asks for no order. …后… as "then": in the same clause as 先, or opening the next one
# ("先去了哪，后去了哪"); never 后 in a word of its own (以后, 之后, 最后, 饭后, 后来, 后悔, 后续, 后年, 皇后 …) nor
# after 先 in a fixed pair (先手/后手, 先验, 先来后到).
_THEN_HOU = (r"(?<![首原优率领争预事祖起早])先(?![生前进锋天知辈驱例手验帝来])"
             r"[^，,；;：:、？?。！!]{1,15}(?:[，,]\s{0,3})?"
             r"(?<![以之最然随饭身皇落前背午会事此今稍])后(?![悔来面天果续代者院年期半])")
_SEQUENCE_ZH = patterns.compile(
    r"(?<![祖])先后(?![生])|顺序|次序|依次|时间线|时间顺序|" + _XIAN + r"[^？?。！!]{1,30}还是[^？?。！!]{0,8}先|"
    + _XIAN + r"(?:[^，,；;：:？?。！!]{1,30}|[^？?。！!]{1,30}[，,；;]\s{0,3})(?:然后|接着|再)|"
    + _XIAN + r"[^？?。！!]{1,30}[^以]后(?:再|又)|" + _THEN_HOU + r"|"
    + r"哪(?:个|件事?)" + _XIAN + r"|谁" + _XIAN + r"|最" + _XIAN + r"发生|"
    + r"(?:之前|以前)还是(?:之后|以后)|(?:之后|以后)还是(?:之前|以前)")


def sequence(query: str) -> str | None:
    """The words by which a query asks for the order of events ("which came first", "先…还是先…"), if it does."""
    return _first(_SEQUENCE_EN, query) or _first(_SEQUENCE_ZH, query)
