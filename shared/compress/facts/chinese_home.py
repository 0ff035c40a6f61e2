"""Chinese rules for the speaker's household and tastes: pets, partner, family, likes, allergies, diet, birthday."""
from shared.compress.facts.fact import Fact, Hit, Said, object_key
from shared.compress.facts.han import HAN, name, object_phrase
from shared.compress.facts.numerals import ZH_NUMBER, zh_int
from shared.compress.facts.vocabulary import ZH_SPECIES
from shared.text import patterns

_SPECIES = "|".join(sorted(ZH_SPECIES, key=len, reverse=True))
_CALLED = r"(?:，|,)?(?:它)?(?:叫做|名叫|名字叫|的名字叫|的名字是|叫)"
_NAME_RUN = r"(?P<name>[\u4e00-\u9fffA-Za-z]{1,6})"
# After the species: its name, or the end of the clause (not "猫头鹰", "狗粮").
_SPECIES_END = r"(?=$|[，。！？!?,.；\s]|叫|名叫|名字)"
_HAVE_PET = patterns.compile(r"我(?:们)?(?:家)?(?:养了|养着|有|也养了|还养了)(?:一只|一条|一个|只|条)?(?P<species>"
                             + _SPECIES + r")" + _SPECIES_END + r"(?:" + _CALLED + _NAME_RUN + ")?")
_MY_PET = patterns.compile(r"我(?:们)?(?:的|家的|家)(?P<species>" + _SPECIES + r")" + _CALLED + _NAME_RUN)
_PARTNERS = r"老婆|老公|妻子|丈夫|太太|先生|女朋友|男朋友|女友|男友|未婚妻|未婚夫|爱人"
_RELATIVES = {"妹妹": "sister", "姐姐": "sister", "哥哥": "brother", "弟弟": "brother", "儿子": "son",
              "女儿": "daughter", "妈妈": "mother", "母亲": "mother", "爸爸": "father", "父亲": "father"}
_PERSON_CALLED = r"(?:叫做|名叫|名字叫|的名字是|叫)"
_PARTNER = patterns.compile(r"我(?:的)?(?P<rel>" + _PARTNERS + r")" + _PERSON_CALLED + _NAME_RUN)
_FAMILY = patterns.compile(r"我(?:的)?(?P<rel>" + "|".join(_RELATIVES) + r")" + _PERSON_CALLED + _NAME_RUN)
_DEGREE = r"(?:也|还|真的|真|很|非常|特别|超级|超|一直|挺|蛮|比较|好|都|最)*"
_LIKES = patterns.compile(r"我" + _DEGREE + r"(?:喜欢|热爱|喜爱|爱)")
_DISLIKES = patterns.compile(r"我(?:也|还|真的|真|很|非常|特别|一点也|一点都|并|就|可|实在|最|是真的)*"
                             r"(?:不太喜欢|不是很喜欢|不喜欢|不爱|讨厌|受不了|厌恶)")
# "我最喜欢的乐队是X", "现在最爱的书是X", "我现在最喜欢的乐队换成X了": the speaker's, said by 我 or opening the
# sentence (after a comma the subject may be whoever the clause before was about: "我女儿三岁，最喜欢的..."). The kind
# holds no adverb or negation ("最喜欢的菜不是火锅", "...可能是..." say no favourite).
_NOT_IN_KIND = r"(?!不|没|一直|应该|可能|已经|其实|大概|都|还|也|就|是)"
_FAVOURITE = patterns.compile(r"(?:我|^)(?:现在|目前|最近|一直|还是|也){0,8}最(?:喜欢|爱)的"
                              r"(?P<what>(?:" + _NOT_IN_KIND + HAN + r"){1,4}?)(?:就|还|也|一直|已经)?"
                              r"(?:是|换成了?|变成了?)")
_ALLERGY = patterns.compile(r"我(?:也|还|一直)?对(?P<obj>[^，。！？!?,；\s]{1,10}?)(?P<neg>不再|已经不|不|没有)?过敏")
_ZH_END = r"(?=$|[^\u4e00-\u9fff]|[了的已很也都就好多])"
_DIETS = [
    (patterns.compile(r"我(?:现在|已经|一直|也){0,8}(?:吃纯素|是纯素食者|是纯素食主义者)" + _ZH_END), "纯素", "吃纯素"),
    (patterns.compile(r"我(?:现在|已经|一直|也){0,8}(?:吃素|是素食者|是素食主义者|是一名素食者|是一个素食主义者)"
                      + _ZH_END), "素食", "吃素"),
    (patterns.compile(r"我(?:现在|已经|一直|也){0,8}(?:不吃肉|不再吃肉|戒了肉)" + _ZH_END), "素食", "不吃肉"),
]
_VAGUE = patterns.compile(r"什么|东西|这|那")  # "我对什么都过敏", "我对这个过敏": no allergen named
_DATE = r"(?:(?P<y>\d{4})年)?(?P<m>" + ZH_NUMBER + r")月(?P<d>" + ZH_NUMBER + r")[日号]"
_BIRTHDAY = [patterns.compile(r"我(?:的)?生日(?:是|在)" + _DATE), patterns.compile(r"我(?:是)?(?:出生于|生于)" + _DATE),
             patterns.compile(r"我是" + _DATE + "出生的")]


def pets(sentence: str, said: Said) -> list[Hit]:
    """Pets: "我养了一只猫叫咪咪", "我的狗叫旺财", "我家有一只兔子"."""
    hits = []
    for pattern in (_HAVE_PET, _MY_PET):
        for match in pattern.finditer(sentence):
            species, shown = ZH_SPECIES[match.group("species")]
            called = name(match.group("name"), min_chars=1, max_chars=3) if match.group("name") else None
            if match.group("name") and called is None:
                continue  # "叫" went on to something that is not a name
            measure = "条" if shown == "鱼" else "只"
            statement = f"{said.speaker}养了一{measure}{shown}" + (f"，名叫{called}" if called else "")
            hits.append(Hit(Fact(f"pet:{species}", called or shown, statement, entities=(called,) if called else ()),
                            match.start(), match.end()))
    return hits


def people(sentence: str, said: Said) -> list[Hit]:
    """Partner and family: "我老婆叫小红" (partner), "我妹妹叫小美" (family, keyed by name)."""
    hits = []
    for match in _PARTNER.finditer(sentence):
        called = name(match.group("name"))
        if called:
            hits.append(Hit(Fact("partner", called, f"{said.speaker}的{match.group('rel')}叫{called}", (called,),
                                 (called,)), match.start(), match.end()))
    for match in _FAMILY.finditer(sentence):
        called = name(match.group("name"))
        if called:
            rel = match.group("rel")
            hits.append(Hit(Fact(f"family:{_RELATIVES[rel]}:{called.casefold()}", called,
                                 f"{said.speaker}的{rel}叫{called}", (called,), (called,)), match.start(), match.end()))
    return hits


def preferences(sentence: str, said: Said) -> list[Hit]:
    """Likes and dislikes ("我喜欢爬山", "我不喜欢香菜", "我讨厌下雨"), keyed by their object, and favourites
    ("我最喜欢的水果是芒果"), keyed by their kind: one favourite fruit at a time."""
    hits = []
    for pattern, likes in ((_LIKES, True), (_DISLIKES, False)):
        for match in pattern.finditer(sentence):
            obj = object_phrase(sentence[match.end():])
            if obj:
                verb = "喜欢" if likes else "不喜欢"
                hits.append(Hit(Fact(f"preference:{object_key(obj)}", "likes" if likes else "dislikes",
                                     f"{said.speaker}{verb}{obj}"), match.start(), match.end() + len(obj)))
    for match in _FAVOURITE.finditer(sentence):
        obj = object_phrase(sentence[match.end():])
        if obj:
            hits.append(Hit(Fact(f"favourite:{match.group('what')}", obj,
                                 f"{said.speaker}最喜欢的{match.group('what')}是{obj}"),
                            match.start(), match.end() + len(obj)))
    return hits


def allergies(sentence: str, said: Said) -> list[Hit]:
    """Allergies: "我对花生过敏", "我对猫毛不过敏"."""
    hits = []
    for match in _ALLERGY.finditer(sentence):
        obj = object_phrase(match.group("obj"))
        if obj and obj == match.group("obj") and not _VAGUE.search(obj):
            allergic = not match.group("neg")
            text = f"{said.speaker}对{obj}{'过敏' if allergic else '不过敏'}"
            hits.append(Hit(Fact(f"allergy:{object_key(obj)}", "allergic" if allergic else "not allergic", text),
                            match.start(), match.end()))
    return hits


def diet(sentence: str, said: Said) -> list[Hit]:
    """Diet: "我吃素", "我是素食者", "我不吃肉"."""
    return [Hit(Fact("diet", value, f"{said.speaker}{verb}"), m.start(), m.end())
            for pattern, value, verb in _DIETS for m in pattern.finditer(sentence)]


def birthday(sentence: str, said: Said) -> list[Hit]:
    """Birthday: "我的生日是3月3日", "我出生于1990年三月三日"."""
    hits = []
    for pattern in _BIRTHDAY:
        for match in pattern.finditer(sentence):
            month, day = zh_int(match.group("m")), zh_int(match.group("d"))
            if 1 <= month <= 12 and 1 <= day <= 31:
                value = f"{month}月{day}日"
                hits.append(Hit(Fact("birthday", value, f"{said.speaker}的生日是{value}"), match.start(), match.end()))
    return hits
