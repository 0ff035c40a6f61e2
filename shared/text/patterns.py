"""The one place that chooses the engine of every regular expression engram compiles, so each runs in linear time.

Python's `re` backtracks: a repetition whose alternatives overlap ("刚" and "刚刚") can try exponentially many ways
to split a turn before it gives up, holding the GIL all the while. `compile` keeps a pattern on `re` only when its
shape makes it linear there (`pattern_shape`: every repetition bounded, or possessive over a run no other attempt
reads, or ending the pattern). Any other pattern runs on RE2 (`re2_patterns`), which never backtracks, when RE2 can
run it with Python's meaning; one that neither runs in linear time is refused with a ValueError at import, which says
what to bound or make possessive. `re` comes first because RE2's Python binding costs a call and a few objects per
match: 5 to 15 times `re` on the patterns that split text into words.

A pattern is written once, in Python's syntax: bounded repetitions (`{0,8}`), possessive ones (`*+`, `++`) and
atomic groups make it linear on `re`. `tests/unit/test_pattern_guard.py` times every pattern engram holds on inputs
built to make it work hardest; `python -m bench.patterns` prints the slowest.
"""
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, Protocol, cast

from shared.text.pattern_shape import nonlinear
from shared.text.re2_patterns import Re2Pattern, Translation

_parser: Any = importlib.import_module("re._parser")  # the standard library's own reading of a pattern

IGNORECASE = re.IGNORECASE  # the flags, so that a module needs nothing of `re` besides this one
MULTILINE = re.MULTILINE
DOTALL = re.DOTALL
escape = re.escape  # a literal, as either engine reads it


class Match(Protocol):
    """What engram reads of a match, the same from either engine."""

    def group(self, group: int | str = 0, /) -> str | Any:
        """The text of a group (None when it took no part)."""

    def start(self, group: int | str = 0, /) -> int:
        """Where a group starts (-1 when it took no part)."""

    def end(self, group: int | str = 0, /) -> int:
        """Where a group ends (-1 when it took no part)."""

    def span(self, group: int | str = 0, /) -> tuple[int, int]:
        """(start, end) of a group."""


class Pattern(Protocol):
    """A compiled pattern, with the part of `re.Pattern`'s interface engram uses; `engine` says which one runs it."""

    pattern: str
    flags: int
    engine: str

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        """The first match at or after `pos`."""

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        """A match that starts at `pos`."""

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        """A match of the whole of `string[pos:endpos]`."""

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[Match]:
        """Every match, left to right, none overlapping."""

    def findall(self, string: str) -> list[Any]:
        """Every match's text, or its group's, or its groups' (as `re.findall`)."""

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        """`string` cut at the matches, groups kept (as `re.split`)."""

    def sub(self, repl: str | Callable[[Match], str], string: str, count: int = 0) -> str:
        """`string` with the matches replaced (a replacement string is taken as it is: no group references)."""


def compile(pattern: str, flags: int = 0) -> Pattern:
    """`pattern` compiled by Python's `re` when its shape makes it linear there, else by RE2 when RE2 can run it
    with the same meaning; ValueError when neither holds, saying what to bound or make possessive."""
    tree = _parser.parse(pattern, flags)
    problem = nonlinear(tree)
    if problem is None:
        return _RePattern(re.compile(pattern, flags))
    translated = Translation(tree).run()
    engine = Re2Pattern(pattern, flags, *translated) if translated is not None else None
    if engine is not None and engine.ok:
        return engine
    raise ValueError(f"pattern {pattern[:80]!r} cannot run on RE2, and on Python's engine it {problem}")


# Python's engine, for the patterns whose shape makes them linear there.


class _RePattern:
    """A pattern Python's `re` runs (its shape checked linear), behind the same interface as RE2's."""

    engine = "re"

    def __init__(self, compiled: re.Pattern[str]) -> None:
        self._re = compiled
        self.pattern = compiled.pattern
        self.flags = compiled.flags

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        """The first match at or after `pos`."""
        return cast("Match | None", self._re.search(string, pos, endpos))

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        """A match that starts at `pos`."""
        return cast("Match | None", self._re.match(string, pos, endpos))

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        """A match of the whole of `string[pos:endpos]`."""
        return cast("Match | None", self._re.fullmatch(string, pos, endpos))

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[Match]:
        """Every match, left to right, none overlapping."""
        return cast("Iterator[Match]", self._re.finditer(string, pos, endpos))

    def findall(self, string: str) -> list[Any]:
        """Every match's text, or its group's, or its groups'."""
        return self._re.findall(string)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        """`string` cut at the matches, groups kept."""
        return self._re.split(string, maxsplit)

    def sub(self, repl: str | Callable[[Match], str], string: str, count: int = 0) -> str:
        """`string` with the matches replaced."""
        return self._re.sub(cast(Callable[[re.Match[str]], str] | str, repl), string, count)

    def __repr__(self) -> str:
        return f"patterns.compile({self.pattern!r}, {self.flags!r}) on re"
