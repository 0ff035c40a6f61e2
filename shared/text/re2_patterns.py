"""RE2 running a pattern written for Python's `re`, with Python's meaning: the translation, and the matches.

RE2 never backtracks: it matches in time linear in its input by construction. It runs a pattern when the pattern
needs nothing RE2 lacks: no look-around, no word boundary (RE2's `\\b` knows only ASCII letters, Python's every
letter: "我说I'm" would read differently), no back-reference, no case folding (Python folds "İ" and "ı" into "i",
RE2 does not), no empty match (the engines step past one differently). `\\w`, `\\d` and `\\s` are written out as
the code points Python gives them; a final `$` still matches before a last newline; a possessive run is taken as a
greedy one when what may follow it cannot start with what it repeats (it is taken whole either way).
"""
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import re2  # type: ignore[import-untyped]

from shared.text import codepoints
from shared.text.codepoints import Ranges

_re2_core: Any = importlib.import_module("re2._re2")   # RE2 itself: spans in bytes, and the offset conversions
_parser_constants: Any = importlib.import_module("re._constants")
MAXREPEAT: int = _parser_constants.MAXREPEAT  # "no bound" in a parsed pattern
_SURROGATES = (0xD800, 0xDFFF)
_REPLACEMENT = 0xFFFD  # stands in for a lone surrogate, which UTF-8 (and so RE2) cannot hold
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ANCHOR = _re2_core.RE2.Anchor
_NO_SPAN = (-1, -1)


class Translation:
    """A Python pattern's tree written in RE2's syntax with Python's meaning, or None when RE2 cannot run it."""

    def __init__(self, tree: Any) -> None:
        self.tree = tree
        self.names = {number: name for name, number in tree.state.groupdict.items()}
        self.trailing_end = False  # the pattern ends with `$` (Python: the end, or before a final newline)

    def run(self) -> tuple[str, str] | None:
        """(RE2's source for search and match, RE2's source for fullmatch), or None."""
        seq = list(self.tree)
        try:
            if self.tree.getwidth()[0] == 0:
                raise codepoints.Unsupported("it may match the empty string (the engines step past one differently)")
            if seq and str(seq[-1][0]) == "AT" and str(seq[-1][1]) == "AT_END" and \
                    not self.tree.state.flags & re.MULTILINE:
                self.trailing_end = True
                seq = seq[:-1]
            body = self._seq(seq, self.tree.state.flags, [(10, 10)] if self.trailing_end else [])
        except codepoints.Unsupported:
            return None
        if not self.trailing_end:
            return body, body
        # `$` holds at the end and before a final newline: the newline is matched by a group of its own, after
        # Python's groups, and the match ends where that group starts.
        return f"(?:{body})(\\n?)\\z", body

    def _seq(self, seq: list[tuple[Any, Any]], flags: int, follow: Ranges) -> str:
        """`seq` in RE2's syntax; `follow` holds the characters that may come first after it."""
        return "".join(self._node(op, av, flags, _first(seq[i + 1:], flags, follow))
                       for i, (op, av) in enumerate(seq))

    def _node(self, op: Any, av: Any, flags: int, follow: Ranges) -> str:
        name = str(op)
        if name == "LITERAL":
            self._cased(flags, [(av, av)])
            return _char(av)
        if name == "NOT_LITERAL":
            self._cased(flags, [(av, av)])
            return _class(codepoints.complement([(av, av)]))
        if name == "ANY":
            return _class([(0, codepoints.MAX_CODE_POINT)] if flags & re.DOTALL else codepoints.complement([(10, 10)]))
        if name == "IN":
            ranges = codepoints.class_ranges(av, flags)
            self._cased(flags, ranges)
            return _class(ranges)
        if name == "CATEGORY":
            return _class(codepoints.category(str(av), flags))
        if name == "BRANCH":
            return "(?:" + "|".join(self._seq(list(alt), flags, follow) for alt in av[1]) + ")"
        if name == "SUBPATTERN":
            group, add, remove, body = av
            inner = self._seq(list(body), (flags | add) & ~remove, follow)
            if group is None:
                return f"(?:{inner})"
            label = self.names.get(group)
            return f"(?P<{label}>{inner})" if label else f"({inner})"
        if name == "POSSESSIVE_REPEAT":
            # A possessive run of one class whose characters cannot come next is taken whole either way.
            run = codepoints.one_character(list(av[2]), flags)
            if run is None or codepoints.overlaps(run, follow):
                raise codepoints.Unsupported("a possessive repetition that gives back what may come next")
            name = "MAX_REPEAT"
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, body = av
            if low > 1000 or (high != MAXREPEAT and high > 1000):
                raise codepoints.Unsupported("RE2 repeats at most 1000 times")
            upper = "" if high == MAXREPEAT else str(high)
            quantifier = f"{{{low},{upper}}}" if low != high else f"{{{low}}}"
            inner = self._seq(list(body), flags, codepoints.join(follow, _first(list(body), flags, [])))
            return f"(?:{inner}){quantifier}" + ("?" if name == "MIN_REPEAT" else "")
        if name == "AT":
            lines = bool(flags & re.MULTILINE)  # the parser writes `^` and `$` alike; MULTILINE makes them lines'
            at = {"AT_BEGINNING": "(?m:^)" if lines else r"\A", "AT_BEGINNING_STRING": r"\A",
                  "AT_END_STRING": r"\z", "AT_END": "(?m:$)" if lines else None}.get(str(av))
            if at is None:
                raise codepoints.Unsupported(f"{av} (RE2's word boundary is ASCII's; a `$` is kept only at the end)")
            return at
        raise codepoints.Unsupported(name)  # look-arounds, back-references, atomic groups, possessive repetitions

    @staticmethod
    def _cased(flags: int, ranges: list[tuple[int, int]]) -> None:
        """Case folding is left to Python: RE2 folds some letters differently ("İ" and "ı" are no "i" there)."""
        if flags & re.IGNORECASE and codepoints.is_cased(ranges):
            raise codepoints.Unsupported("case folding")


def _first(seq: list[tuple[Any, Any]], flags: int, follow: Ranges) -> Ranges:
    """The characters a match of `seq` may start with, and those of `follow` when it may match nothing."""
    out: list[Ranges] = []
    for op, av in seq:
        name = str(op)
        if name in codepoints.ONE_CHARACTER:
            return codepoints.join(*out, codepoints.one_character([(op, av)], flags) or [])
        if name in ("SUBPATTERN", "ATOMIC_GROUP", "BRANCH") or name in codepoints.REPEATS:
            alternatives = [list(alt) for alt in av[1]] if name == "BRANCH" else \
                [list(av[3] if name == "SUBPATTERN" else av[2] if name in codepoints.REPEATS else av)]
            inner = (flags | av[1]) & ~av[2] if name == "SUBPATTERN" else flags
            marker = [(-2, -2)]  # reached the end of the alternative: it may match nothing
            starts = [r for alt in alternatives for r in _first(alt, inner, marker)]
            nullable = marker[0] in starts or (name in codepoints.REPEATS and av[0] == 0)
            out.append([r for r in starts if r != marker[0]])
            if not nullable:
                return codepoints.join(*out)
        elif name not in ("AT", "ASSERT", "ASSERT_NOT"):  # those take nothing
            return [(0, codepoints.MAX_CODE_POINT)]
    return codepoints.join(*out, follow)


def _char(code: int) -> str:
    return chr(code) if chr(code).isascii() and chr(code).isalnum() else f"\\x{{{code:x}}}"


def _class(ranges: list[tuple[int, int]]) -> str:
    """A character class of RE2 for these code points, less the surrogates (text never holds them there)."""
    kept = codepoints.minus(ranges, [_SURROGATES])
    if codepoints.holds(ranges, _SURROGATES[0]) != codepoints.holds(ranges, _REPLACEMENT) or \
            any(codepoints.holds(ranges, c) != codepoints.holds(ranges, _SURROGATES[0]) for c in _SURROGATES):
        raise codepoints.Unsupported("a class that tells a lone surrogate from U+FFFD")
    if not kept:
        return "[^\\x00-\\x{10ffff}]"
    return "[" + "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in kept) + "]"


class Re2Match:
    """A match found by RE2, its spans in characters of the text it was found in."""

    __slots__ = ("_names", "_spans", "_text")

    def __init__(self, text: str, spans: list[tuple[int, int]], names: dict[str, int]) -> None:
        self._text = text
        self._spans = spans
        self._names = names

    def _index(self, group: int | str) -> int:
        index = self._names[group] if isinstance(group, str) else group
        if not 0 <= index < len(self._spans):
            raise IndexError("no such group")
        return index

    def group(self, group: int | str = 0, /) -> str | Any:
        """The text of a group (None when it took no part)."""
        start, end = self._spans[self._index(group)]
        return None if start < 0 else self._text[start:end]

    def start(self, group: int | str = 0, /) -> int:
        """Where a group starts (-1 when it took no part)."""
        return self._spans[self._index(group)][0]

    def end(self, group: int | str = 0, /) -> int:
        """Where a group ends (-1 when it took no part)."""
        return self._spans[self._index(group)][1]

    def span(self, group: int | str = 0, /) -> tuple[int, int]:
        """(start, end) of a group."""
        return self._spans[self._index(group)]

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        """Every group's text, `default` for those that took no part."""
        return tuple(default if s < 0 else self._text[s:e] for s, e in self._spans[1:])

    def __repr__(self) -> str:
        return f"<Re2Match span={self._spans[0]} match={self.group(0)!r}>"


class Re2Pattern:
    """A pattern RE2 runs, with Python's `re` semantics for what engram asks of it."""

    engine = "re2"

    def __init__(self, pattern: str, flags: int, source: str, whole: str) -> None:
        self.pattern = pattern
        self.flags = flags
        self.source = source  # RE2's syntax
        self._search = _re2_core.RE2(source.encode(), re2.Options())
        self._whole = _re2_core.RE2(whole.encode(), re2.Options()) if whole != source else self._search
        self.ok = self._search.ok() and self._whole.ok()  # RE2 compiles what it reads, or says it cannot
        self._trimmed = whole != source  # the last group is the newline before a final `$`
        self.groupindex = {name.decode(): index for name, index in self._search.NamedCapturingGroups()}

    def _run(self, anchor: Any, string: str, pos: int, endpos: int, regexp: Any) -> Iterator[Re2Match]:
        """Matches from `pos`, as Python finds them: `endpos` ends the text, and the next search starts where a
        match ended (no match is empty, so there is no empty one to step past)."""
        text = string if endpos >= len(string) else string[:max(endpos, 0)]
        pos = max(0, min(pos, len(text)))
        encoded, plain = _encoded(text)
        known = (pos, pos) if plain else (_re2_core.CharLenToBytes(encoded, 0, pos), pos)  # (byte, character)
        trimmed = self._trimmed and regexp is self._search
        once = anchor != _ANCHOR.UNANCHORED  # compared here once: comparing RE2's enums costs microseconds
        while True:
            spans = regexp.Match(anchor, encoded, known[0], len(encoded))
            if spans[0] == _NO_SPAN:
                return
            if trimmed:  # the match ends where the newline before a final `$` starts
                spans = [(spans[0][0], spans[-1][0]), *spans[1:-1]]
            if plain:
                chars = list(spans)
            else:  # byte offsets to characters, counting forward from the last offset known
                at = {known[0]: known[1]}
                base = known
                for offset in sorted({o for span in spans for o in span if o >= 0}):
                    at[offset] = base[1] + _re2_core.BytesToCharLen(encoded, base[0], offset)
                    base = (offset, at[offset])
                chars = [span if span == _NO_SPAN else (at[span[0]], at[span[1]]) for span in spans]
            yield Re2Match(string, chars, self.groupindex)
            if once:
                return
            known = (spans[0][1], chars[0][1])

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Re2Match | None:
        """The first match at or after `pos`."""
        return next(self._run(_ANCHOR.UNANCHORED, string, pos, endpos, self._search), None)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Re2Match | None:
        """A match that starts at `pos`."""
        return next(self._run(_ANCHOR.ANCHOR_START, string, pos, endpos, self._search), None)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Re2Match | None:
        """A match of the whole of `string[pos:endpos]` (a final `$` holds there of itself)."""
        return next(self._run(_ANCHOR.ANCHOR_BOTH, string, pos, endpos, self._whole), None)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[Re2Match]:
        """Every match, left to right, none overlapping."""
        return self._run(_ANCHOR.UNANCHORED, string, pos, endpos, self._search)

    def findall(self, string: str) -> list[Any]:
        """Every match's text, or its group's, or its groups' (as `re.findall`)."""
        out: list[Any] = []
        for found in self._run(_ANCHOR.UNANCHORED, string, 0, sys.maxsize, self._search):
            groups = found.groups(default="")
            out.append(found.group(0) if not groups else groups[0] if len(groups) == 1 else groups)
        return out

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        """`string` cut at the matches, groups kept (as `re.split`)."""
        out: list[str | Any] = []
        last = 0
        for n, found in enumerate(self._run(_ANCHOR.UNANCHORED, string, 0, sys.maxsize, self._search)):
            if maxsplit and n >= maxsplit:
                break
            out.append(string[last:found.start()])
            out += list(found.groups())
            last = found.end()
        out.append(string[last:])
        return out

    def sub(self, repl: str | Callable[[Re2Match], str], string: str, count: int = 0) -> str:
        """`string` with the matches replaced (a replacement string is taken as it is: no group references)."""
        if isinstance(repl, str) and "\\" in repl:
            raise ValueError("a replacement with group references is not supported: pass a function")
        out: list[str] = []
        last = 0
        for n, found in enumerate(self._run(_ANCHOR.UNANCHORED, string, 0, sys.maxsize, self._search)):
            if count and n >= count:
                break
            out += [string[last:found.start()], repl if isinstance(repl, str) else repl(found)]
            last = found.end()
        out.append(string[last:])
        return "".join(out)

    def __repr__(self) -> str:
        return f"patterns.compile({self.pattern!r}, {self.flags!r}) on re2"


def _encoded(text: str) -> tuple[bytes, bool]:
    """The text as UTF-8 (a lone surrogate as U+FFFD, one character for one), and whether it is ASCII."""
    if text.isascii():
        return text.encode(), True
    try:
        return text.encode(), False
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode(), False
