"""How Chinese turns are read: sentences, which of them are plain first-person statements, and the rules."""
from shared.compress.facts import changes, chinese_home, chinese_life, plans
from shared.compress.facts.fact import Reader
from shared.text import patterns

# A line break that does not follow another one opens a run of them, so only its first is a place to start.
_SPLIT = patterns.compile(r"(?<=[。！？!?；;…])|(?<!\n)\n++")
# Chat often separates clauses with a space instead of a comma ("最喜欢的乐队是惘闻 他们今年有演出吗"): a space between
# two Han characters ends a clause, and a clause that asks is left out of its sentence, so it does not hide the
# statement beside it, while the words before a statement ("如果 我搬到上海") still say what it is.
_CLAUSE = patterns.compile(r"(?<=[\u4e00-\u9fff])[ \u3000]++(?=[\u4e00-\u9fff])")
_QUESTION = patterns.compile(r"吗|什么|怎么|为什么|哪里|哪儿|哪个|是不是|有没有|要不要|多少|几个|谁|啥")
# Words before a match that make it a supposition, a wish, a report or the past ("以前我住在北京"); "跟你说" (let me
# tell you) is the speaker's own news, not a report.
_NOT_PLAIN_BEFORE = patterns.compile(
    r"如果|要是|假如|假设|万一|也许|可能|或许|但愿|希望|想|梦想|以前|之前|曾经|小时候|过去|那时|当时|原来|本来|"
    r"(?<!跟你)(?<!和你)(?<!给你)(?<!听我)说|觉得|"
    r"以为|认为|听说|不知道|假装|玩笑|的话")
# Words after a match that say the state is over ("我住在北京的时候", "我住在北京，后来搬走了").
_NOT_PLAIN_AFTER = patterns.compile(r"^(?:的)?时候|^时|^以前|^之前|^那年|^那会|后来|但是现在|不过现在|的话|已经不|去世|"
                                    r"离婚|分手")


def sentences(text: str) -> list[str]:
    """`text` split after 。！？ and at line breaks (the punctuation stays with its sentence), each without the
    clauses that ask (split off at a space between Han characters) when some clause of it does not."""
    out = []
    for sentence in (s.strip() for s in _SPLIT.split(text) if s and s.strip()):
        told = [c for c in _CLAUSE.split(sentence) if not is_question(c)]
        out.append(" ".join(told) if told else sentence)
    return out


def is_question(sentence: str) -> bool:
    """A question by its mark or its question words (吗, 什么, 是不是 ...)."""
    return sentence.rstrip().endswith(("?", "？")) or bool(_QUESTION.search(sentence))


def blocked(before: str, after: str) -> bool:
    """Whether the words around a match make it a supposition, a wish, a report or a state that is over."""
    return bool(_NOT_PLAIN_BEFORE.search(before) or _NOT_PLAIN_AFTER.search(after))


READER = Reader(sentences=sentences, is_question=is_question, blocked=blocked, rules=(
    chinese_life.lives_in, chinese_life.origin, chinese_life.works_at, chinese_life.occupation, chinese_life.studies,
    chinese_home.pets, chinese_home.people, chinese_home.preferences, chinese_home.allergies, chinese_home.diet,
    chinese_home.birthday, plans.chinese_plans, changes.chinese))
