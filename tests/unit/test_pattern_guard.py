"""The guard: every regular expression engram holds runs in time linear in its input, so no chat message can stall
the process (Python's `re` holds the GIL for a whole match: one pattern that backtracks freezes every thread).

Every compiled pattern is found by introspection (`bench.patterns.discover`: each module of shared/, services/ and
engram_client, their globals, classes and containers), so a new pattern is covered without anyone listing it. Each
runs (all its matches, and a whole match) on inputs built from its own source at the contract's longest turn text
(MAX_TEXT_CHARS): every repetition pumped with what it repeats after what leads to it, then a character that makes
the match fail; the lead and the body tiled so that every start position works; the pieces mixed at random. Then on
text hypothesis writes in English and Chinese, repeated to that length. The functions that read turns and questions
through the patterns (`bench.patterns.drivers`: the fact rules, the compressor, recall's reading of a question,
importance, figures) run on such text too, since a rule slices and searches what it was given.

Budget, measured with `python -m bench.patterns` and bench/patterns.py's inputs on this project's 2-core machine
(other suites running on it now and then): at 16,000 characters the slowest pattern call took 50-150 ms (RE2
patterns matching every few characters: a call and a few objects per match), most take 1-40 ms; the slowest function,
the English fact rules on sentences of 600-1,000 characters with a hit every few words, 0.1-0.5 s. Before this
guard, patterns that were not linear took 0.13-2 s at that length when quadratic (the LLM reply's scratchpad 0.18 s,
the figures' date notes 0.9 s, the compressor's spaces 1.9 s) and never finished when exponential (2 s at 64
characters), and the English rules took 0.8-5.8 s on one sentence that never stops. So a pattern call fails past
BUDGET_S = 1 s (~7x the slowest linear one) and a function call past FUNCTION_BUDGET_S = 4 s (~8x); a call past
GROWTH_FLOOR_S (FUNCTION_GROWTH_FLOOR_S) is timed again on an eighth of its input, and fails when it took more than
GROWTH_RATIO = 24 times as long (linear: 8; quadratic: 64), which catches the quadratic ones that stay under a
second at 16,000 characters. Each timing is the best of two or three, so a busy machine does not fail it; a call is
stopped at twice its budget. The module runs in 20-30 s.
"""
import functools
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from bench import patterns as measured
from engram_client.contract import MAX_TEXT_CHARS
from engram_client.contract.base import TENANT_PATTERN

BUDGET_S = 1.0
FUNCTION_BUDGET_S = 4.0
GROWTH_FLOOR_S = 0.08  # a call past this at the longest input is timed at an eighth of it too
GROWTH_RATIO = 24.0    # linear: 8 times as long for 8 times the input; quadratic: 64
FUNCTION_GROWTH_FLOOR_S = 0.25
GUARD_FAMILIES = 24  # inputs per pattern here (the benchmark tries 48): every kind, for each repetition's body

FOUND = measured.discover()
DRIVERS = measured.drivers()
TURNS = measured.driver_texts(FOUND, MAX_TEXT_CHARS)
# Words of chat in both languages and the punctuation between them, for hypothesis to put together.
WORDS = ("I", "i", "I'm", "I've", "I'll", "my", "we", "just", "really", "love", "like", "live", "in", "moved", "to",
         "Lisbon", "New", "York", "St.", "the", "a", "an", "sister", "Maria", "dog", "named", "Rex", "work", "at",
         "Google", "as", "nurse", "favourite", "band", "is", "allergic", "peanuts", "vegan", "birthday", "March",
         "3rd", "2024", "next", "month", "going", "if", "not", "how", "many", "now", "before", "(stated", "May)",
         "我", "刚", "刚刚", "现在", "住在", "北京", "喜欢", "最", "的", "是", "在", "腾讯", "工作", "对", "过敏",
         "吃素", "打算", "下个月", "去", "日本", "妹妹", "叫", "小美", "了", "吗", "多少", "几", "个", "以前", "2024年",
         "3月")
SEPARATORS = (" ", "", ", ", ". ", "? ", "! ", "，", "。", "\n", " - ", "  ")
chat = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), min_size=1, max_size=40).map(
    lambda pairs: "".join(word + gap for word, gap in pairs))
any_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60)


def _longest(text: str) -> str:
    """`text` over and over, to the longest turn text the contract accepts."""
    return (text * (MAX_TEXT_CHARS // len(text) + 1))[:MAX_TEXT_CHARS]


def _seconds(call: Callable[[str], object], text: str, tries: int = 1) -> float:
    """The best of `tries` timings (a busy machine slows a call now and then; a slow pattern is slow every time)."""
    return min(measured.timed(functools.partial(call, text), cap_s=2 * BUDGET_S) for _ in range(tries))


def _slow_calls(found: measured.Found, texts: list[tuple[str, str, str]]) -> list[str]:
    """Calls of the pattern over budget, or growing faster than their input (the first is enough).

    `texts` holds (name, text, the same text an eighth as long); the short one is timed only for a call past
    GROWTH_FLOOR_S, to tell a linear call that is merely long from one that grows with the square of its input.
    """
    for name, text, eighth in texts:
        for operation, call in measured.operations(found.pattern):
            seconds = _seconds(call, text)
            if seconds <= GROWTH_FLOOR_S:
                continue
            seconds = min(seconds, _seconds(call, text, tries=2))
            where = f"{found.where} ({found.source[:60]!r}): {operation} on {name}"
            if seconds > BUDGET_S:
                return [f"{where} took {seconds:.2f} s at {len(text):,} characters"]
            shorter = _seconds(call, eighth, tries=3)
            if seconds > GROWTH_FLOOR_S and seconds > GROWTH_RATIO * shorter:
                return [f"{where} took {seconds:.3f} s at {len(text):,} characters and {shorter:.3f} s at "
                        f"{len(eighth):,}: it grows faster than its input"]
    return []


@pytest.mark.parametrize("found", FOUND, ids=[f.where for f in FOUND])
def test_pattern_runs_in_linear_time_on_its_own_pieces(found: measured.Found) -> None:
    """Pumped, tiled and mixed from what the pattern matches, at the longest turn, no call takes past BUDGET_S
    or grows faster than its input."""
    texts = [(name, build(MAX_TEXT_CHARS), build(MAX_TEXT_CHARS // 8))
             for name, build in measured.families(found)[:GUARD_FAMILIES]]
    assert not _slow_calls(found, texts)


def test_every_pattern_is_found() -> None:
    """Introspection reaches the patterns of each package: the fact rules, recall's reading, the contract's."""
    places = {f.where.rsplit(".", 1)[0] for f in FOUND}
    assert {"shared.compress.facts.chinese_life", "shared.compress.facts.english", "shared.evidence.figures",
            "shared.consolidation.importance", "shared.llm.client"} <= places
    assert TENANT_PATTERN in {f.source for f in FOUND}  # the client's, wherever else it is compiled too


# No shrinking: the failure names the slow pattern, and each try of a slow one costs seconds.
GUARD = settings(deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))


@settings(GUARD, max_examples=12)
@given(text=st.one_of(chat, any_text))
def test_every_pattern_runs_in_linear_time_on_chat(text: str) -> None:
    """English and Chinese as hypothesis puts it together (and any Unicode), at the longest turn: no pattern call
    takes past BUDGET_S."""
    long, eighth = _longest(text), _longest(text)[:MAX_TEXT_CHARS // 8]
    slow = [problem for found in FOUND for problem in _slow_calls(found, [("hypothesis text", long, eighth)])]
    assert not slow


@pytest.mark.parametrize("name", [name for name, _ in DRIVERS])
def test_function_runs_in_linear_time(name: str) -> None:
    """The functions that read a turn or a question through the patterns, on every pattern's pieces mixed into the
    longest turn, and on the rules' pieces in one sentence and in sentences of a few hundred characters: no call
    past FUNCTION_BUDGET_S, and none that grows faster than its input."""
    call = dict(DRIVERS)[name]
    call("I moved to Lisbon yesterday. 我昨天搬到了上海。")  # what loads once (the language model, dateparser's tables)
    for kind, text in TURNS.items():
        seconds = min(measured.timed(functools.partial(call, text), cap_s=2 * FUNCTION_BUDGET_S) for _ in range(2))
        assert seconds <= FUNCTION_BUDGET_S, f"{name} took {seconds:.2f} s on {kind}"
        if seconds > FUNCTION_GROWTH_FLOOR_S:
            eighth = min(measured.timed(functools.partial(call, text[:MAX_TEXT_CHARS // 8])) for _ in range(3))
            assert seconds <= GROWTH_RATIO * eighth, f"{name} on {kind}: {seconds:.2f} s, {eighth:.3f} s at an eighth"


RULES = [f for f in FOUND if f.where.startswith("shared.compress.facts.")]


@pytest.mark.parametrize("found", RULES, ids=[f.where for f in RULES])
def test_fact_rules_read_a_sentence_that_never_stops_in_linear_time(found: measured.Found) -> None:
    """What one rule matches, said over and over in one sentence (every match a hit the rules look around): the
    fact rules of either language read the longest turn in less than FUNCTION_BUDGET_S, and no faster-growing."""
    said = next((s for s in measured.pieces(found.source, found.flags).samples
                 if s.strip() and s.isprintable() and not set(s) & set(".!?。！？")), None)
    if said is None:
        pytest.skip("the pattern matches nothing a sentence holds")
    text = _longest(said + " ")
    for name in ("facts_in_turn en", "facts_in_turn zh"):
        call = dict(DRIVERS)[name]
        seconds = measured.timed(functools.partial(call, text), cap_s=2 * FUNCTION_BUDGET_S)
        assert seconds <= FUNCTION_BUDGET_S, f"{name} took {seconds:.2f} s on {said!r} over and over"
        if seconds > FUNCTION_GROWTH_FLOOR_S:
            eighth = min(measured.timed(functools.partial(call, text[:MAX_TEXT_CHARS // 8])) for _ in range(3))
            assert seconds <= GROWTH_RATIO * eighth, f"{name} on {said!r}: {seconds:.2f} s, {eighth:.3f} s at an eighth"


@settings(GUARD, max_examples=3)
@given(text=chat)
def test_functions_run_in_linear_time_on_chat(text: str) -> None:
    """Chat as hypothesis puts it together, at the longest turn, through every function: none past the budget."""
    long = _longest(text)
    for name, call in DRIVERS:
        call("I moved to Lisbon yesterday. 我昨天搬到了上海。")  # what loads once
        start = time.perf_counter()
        call(long)
        assert time.perf_counter() - start <= FUNCTION_BUDGET_S, name


ON_RE2 = [f for f in FOUND if getattr(f.pattern, "engine", "") == "re2"]
# Where RE2 and Python could read text differently: a final newline (Python's `$` holds before it), letters and
# digits beyond ASCII (`\w`, `\d`), spaces beyond ASCII (`\s`), case, and text that is not one script.
TRICKY = ("", "\n", "ab\n", "我\n", "了\n\n", "Zoë ٣ １ ǅ", "a\u00a0b\u3000c", "K ſ İ ı", "我说I'm 住在北京\n",
          "(2024年)\n", "D08:005\n", "```json {\"a\": 1}```\n", "<think>x</think>\n", "haha\n", "a, and b or c\n")


def _found_by(pattern: Any, text: str) -> list[object]:
    """What a pattern finds in `text`, every way engram asks."""
    found: list[object] = [[(m.span(), m.group(0)) for m in pattern.finditer(text)]]
    for call in (pattern.search, pattern.match, pattern.fullmatch):
        match = call(text)
        found.append(None if match is None else (match.span(), match.group(0)))
    tail = pattern.search(text, min(2, len(text)))
    return [*found, None if tail is None else tail.span(), pattern.split(text)]


@pytest.mark.parametrize("found", ON_RE2, ids=[f.where for f in ON_RE2])
def test_re2_finds_what_python_finds(found: measured.Found) -> None:
    """A pattern RE2 runs finds what Python's `re` finds in the same text (short texts: Python's engine backtracks
    on these, which is why RE2 runs them)."""
    python = re.compile(found.source, found.flags)
    texts = [*TRICKY, *(build(n) for _, build in measured.families(found) for n in (4, 11, 23))]
    for text in texts:
        assert _found_by(found.pattern, text) == _found_by(python, text), repr(text)


def test_a_pattern_that_is_not_linear_is_refused() -> None:
    """`patterns.compile` refuses what neither engine runs in linear time, and says what to do about it."""
    from shared.text import patterns  # imported here, so the guard above runs on code from before it existed

    with pytest.raises(ValueError, match="possessive"):
        patterns.compile(r"\b(?:a|aa)*b")  # a word boundary keeps it off RE2; the overlap backtracks in `re`
    assert patterns.compile(r"(?:刚|刚刚)*住在").engine == "re2"  # the same overlap, where RE2 can run it
    assert patterns.compile(r"\bI(?: just){0,8} moved\s++to").engine == "re"  # bounded, and a run taken whole
