"""The shapes of Chinese phrases a fact may name: places, names of people and pets, and short objects."""
from shared.compress.facts.vocabulary import ZH_PLACE_SUFFIXES, ZH_PLACES
from shared.text import patterns

HAN = r"[\u4e00-\u9fff]"
# What may follow a place without making it part of a longer name ("杭州已经三年了", "北京工作").
_AFTER_PLACE = (*"了的很有和跟与一两三四五六七八九十几好快多啦呢吧呀哦住去来后也都就还每年啊",
                "工作", "上班", "读书", "生活", "已经", "附近", "这边", "那边", "定居", "之后", "以后")
_NOT_PLACE_START = tuple("一这那个新小大老我你他她家某哪")
_NOT_PLACES = frozenset({"外国", "本国", "全国", "各国", "城里", "乡下", "国外", "市里", "郊区", "小镇", "小区",
                         "老家"})
# Characters a name never holds but the words after 叫 often do ("我妈妈叫我回家", "我老婆叫外卖了").
_NOT_IN_NAME = patterns.compile(r"[我你他她它们了的吗呢吧啊呀去来回做吃买帮给让过着人车饭别不要把被点快早起醒么这那什]")
_OBJECT_CUT = patterns.compile(r"[，。！？!?,.;；:：、\s（(…~～]|因为|但是|但|所以|可是|不过|而且|还有|和|跟|的时候|"
                         r"[了呢吗吧啊呀哦啦]")
_LATIN_NAME = patterns.compile(r"[A-Z][a-z]++")
_HAN_RUN = patterns.compile(HAN + "++")
_PARTICLE_TAIL = patterns.compile(r"[呢哦啦呀啊吧]+$")
_PERSON = patterns.compile(r"[你他她它我]")
_HAN_OR_LATIN = patterns.compile(HAN + "|[A-Za-z]")
_NOT_OBJECT_START = (*"你他她它我这那上的着过死一", "什么", "大家", "别人", "人家", "自己")


def place(run: str) -> str | None:
    """The place `run` starts with: a known place or a name ending in 省/市/区/州..., followed by nothing new."""
    for size in range(min(8, len(run)), 1, -1):
        candidate, rest = run[:size], run[size:]
        known = candidate in ZH_PLACES
        shaped = candidate.endswith(ZH_PLACE_SUFFIXES) and not candidate.startswith(_NOT_PLACE_START)
        if (known or shaped) and candidate not in _NOT_PLACES and (not rest or rest.startswith(_AFTER_PLACE)):
            return candidate
    return None


def is_place(text: str) -> bool:
    """Whether `text` as a whole is a place by the rules of `place`."""
    return place(text) == text


def name(run: str, *, min_chars: int = 2, max_chars: int = 3) -> str | None:
    """A person's or pet's name: the whole Han run (less a trailing particle), or a capitalised Latin word."""
    latin = _LATIN_NAME.match(run)
    if latin:
        return latin.group(0)
    han = _HAN_RUN.match(run)
    if not han:
        return None
    text = _PARTICLE_TAIL.sub("", han.group(0))
    if not min_chars <= len(text) <= max_chars or _NOT_IN_NAME.search(text):
        return None
    return text


def object_phrase(text: str, max_chars: int = 8) -> str | None:
    """What a liking or an allergy is about, cut at punctuation or a new clause, or None if it is not one."""
    obj = _OBJECT_CUT.split(text, maxsplit=1)[0].strip()
    if obj.endswith("的"):  # "我挺喜欢猫的": the 的 closes the sentence
        obj = obj[:-1]
    if "的" in obj:
        return None  # "中国的文化": a modified noun, too easily cut in the wrong place
    if not obj or len(obj) > max_chars or obj.startswith(_NOT_OBJECT_START):
        return None
    if _PERSON.search(obj) or not _HAN_OR_LATIN.search(obj):
        return None
    return obj
