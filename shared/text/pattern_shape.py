"""Whether a pattern runs in linear time on Python's `re` by its shape alone, or why not.

Python's engine backtracks, so a pattern is linear there only if no attempt reads more than a bounded stretch, or
reads a run that no other attempt reads: `nonlinear` checks that every repetition without a bound is possessive
(what it took is never given back) and is a run of one character class that cannot start inside another, or ends
the pattern, or sits in a pattern anchored at the start; and that the rest of the pattern reads at most `MAX_READ`
characters an attempt.
"""
import importlib
import re
from typing import Any

from shared.text import codepoints
from shared.text.codepoints import Ranges

MAXREPEAT: int = importlib.import_module("re._constants").MAXREPEAT  # "no bound" in a parsed pattern
MAX_READ = 2_000  # characters one attempt of a backtracking pattern may read, look-arounds included


def nonlinear(tree: Any) -> str | None:
    """Why a pattern for Python's engine is not linear by its shape, or None when it is."""
    flags = tree.state.flags
    anchored = not flags & re.MULTILINE and _anchored(list(tree))
    problem = _Shape(anchored).check(list(tree), flags, None, atomic=False)
    if problem:
        return problem
    reach = _reach(list(tree))
    if not anchored and reach > MAX_READ:
        return f"reads up to {reach:,} characters an attempt (at most {MAX_READ:,})"
    return None


def _anchored(seq: list[tuple[Any, Any]]) -> bool:
    """Whether the pattern can only match at the start of the text (`^` without MULTILINE, or `\\A`)."""
    if not seq:
        return False
    op, av = seq[0]
    if str(op) == "AT":
        return str(av) in ("AT_BEGINNING", "AT_BEGINNING_STRING")
    if str(op) == "SUBPATTERN":
        return _anchored(list(av[3]))
    if str(op) == "ATOMIC_GROUP":
        return _anchored(list(av))
    if str(op) == "BRANCH":
        return all(_anchored(list(alt)) for alt in av[1])
    return False


_WORD_START: Ranges = [(-1, -1)]  # stands for "after `\\b`": compared by identity, never read as ranges


class _Shape:
    """Checks that every repetition without a bound is read once, by one attempt, whatever the text.

    Such a repetition is possessive (what it took is never given back) and either a run, one attempt reads once
    and no other attempt reads: it repeats one character class (with bounded look-arounds beside it), and what
    may stand just before it shares no character with that class, so a run starts where its characters start; or
    it ends the pattern, so the attempt that reaches it succeeds and the next one starts after it. In an anchored
    pattern (one attempt) a possessive repetition of any body will do.
    """

    def __init__(self, anchored: bool) -> None:
        self.anchored = anchored

    def check(self, seq: list[tuple[Any, Any]], flags: int, before: Ranges | None, atomic: bool,
              tail: bool = True) -> str | None:
        """The first problem in `seq`, given the characters that may stand before it (None: any, or none)."""
        for i, (op, av) in enumerate(seq):
            problem = self._element(str(op), av, flags, before, atomic, tail and i == len(seq) - 1)
            if problem:
                return problem
            before = self.after(str(op), av, flags, before)
        return None

    def _element(self, name: str, av: Any, flags: int, before: Ranges | None, atomic: bool,
                 tail: bool) -> str | None:
        if before is _WORD_START and name not in codepoints.REPEATS and name not in ("BRANCH", "SUBPATTERN", "AT"):
            before = None
        if name in codepoints.REPEATS:
            _, high, body = av
            last = self.last(list(body), flags, before)
            if before is _WORD_START:
                inner = before if high == 1 else None
            else:
                inner = None if before is None or last is None else codepoints.join(before, last)
            if high == MAXREPEAT:
                if name != "POSSESSIVE_REPEAT" and not atomic:
                    return "backtracks into a repetition without a bound (make it possessive: *+, ++)"
                if not (self.anchored or tail):
                    return self._run(list(body), flags, before)
            return self.check(list(body), flags, inner, atomic, tail=False)
        if name == "SUBPATTERN":
            return self.check(list(av[3]), (flags | av[1]) & ~av[2], before, atomic, tail)
        if name == "ATOMIC_GROUP":
            return self.check(list(av), flags, before, True, tail)
        if name == "BRANCH":
            for alt in av[1]:
                problem = self.check(list(alt), flags, before, atomic, tail)
                if problem:
                    return problem
        if name in ("ASSERT", "ASSERT_NOT"):
            return self.check(list(av[1]), flags, before if av[0] > 0 else None, atomic, tail=False)
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            return "refers back to a group"
        return None

    def _run(self, body: list[tuple[Any, Any]], flags: int, before: Ranges | None) -> str | None:
        """The problem with a possessive repetition without a bound in the middle of a pattern, if any."""
        taking = [(op, av) for op, av in body if str(op) not in ("AT", "ASSERT", "ASSERT_NOT")]
        run = codepoints.one_character(taking, flags)
        if run is None:
            return "repeats more than one character without a bound, and more of the pattern follows"
        if flags & re.IGNORECASE and codepoints.folds(taking):
            return "repeats letters without a bound while ignoring case"
        for op, av in body:
            if str(op) in ("ASSERT", "ASSERT_NOT"):
                problem = self.check(list(av[1]), flags, None, atomic=False, tail=False)
                if problem:
                    return problem
        not_word = codepoints.category("CATEGORY_NOT_WORD", flags)
        word_start = before is _WORD_START and not codepoints.overlaps(run, not_word)
        if not word_start and (before is None or before is _WORD_START or codepoints.overlaps(before, run)):
            return "repeats characters that may also stand just before the run, without a bound"
        return None

    def after(self, name: str, av: Any, flags: int, before: Ranges | None) -> Ranges | None:
        """The characters that may stand just before whatever follows this element."""
        if before is _WORD_START and name != "AT":
            before = None  # a boundary guards only the run that follows it at once
        if name in codepoints.ONE_CHARACTER:
            found = codepoints.one_character([(name, av)], flags)
            if found is not None and flags & re.IGNORECASE and codepoints.folds([(name, av)]):
                # Ignoring case, a letter stands for others (Kelvin's K for k): any but a space or a digit, which
                # have no case.
                letters = codepoints.category_of("CATEGORY_NOT_SPACE_OR_DIGIT", bool(flags & re.ASCII))
                found = letters if codepoints.within(found, letters) else codepoints.join(found, letters)
            return found
        if name == "AT" and str(av) == "AT_BOUNDARY" and before is None:
            return _WORD_START  # before a run of word characters, `\\b` says a non-word character stands there
        if name in ("ASSERT", "ASSERT_NOT") and av[0] < 0:
            behind = codepoints.one_character(list(av[1]), flags)
            if behind is not None and not (flags & re.IGNORECASE and codepoints.folds(list(av[1]))):
                # What a lookbehind lets stand there.
                return behind if name == "ASSERT" else codepoints.complement(behind)
        if name in ("AT", "ASSERT", "ASSERT_NOT"):
            return before  # they read, but take nothing
        if name == "SUBPATTERN":
            return self.last(list(av[3]), (flags | av[1]) & ~av[2], before)
        if name == "ATOMIC_GROUP":
            return self.last(list(av), flags, before)
        if name == "BRANCH":
            lasts = [self.last(list(alt), flags, before) for alt in av[1]]
            return None if any(x is None for x in lasts) else codepoints.join(*(x or [] for x in lasts))
        if name in codepoints.REPEATS:
            low, high, body = av
            last = self.last(list(body), flags, before)
            if high == 0:
                return before
            if last is None or (low == 0 and before is None):
                return None
            return codepoints.join(last, before or []) if low == 0 else last
        return None

    def last(self, seq: list[tuple[Any, Any]], flags: int, before: Ranges | None) -> Ranges | None:
        """The characters a match of `seq` may end with (those before it, when it may match nothing)."""
        for op, av in seq:
            before = self.after(str(op), av, flags, before)
        return before


def _reach(seq: list[tuple[Any, Any]]) -> int:
    """Most characters one attempt may read in its bounded parts, look-arounds included (a run checked by
    `_Shape` is read once whoever reads it, so it counts as one)."""
    total = 0
    for op, av in seq:
        name = str(op)
        if name in codepoints.REPEATS:
            _, high, body = av
            total += (1 if high == MAXREPEAT else high) * _reach(list(body))
        elif name == "SUBPATTERN":
            total += _reach(list(av[3]))
        elif name == "ATOMIC_GROUP":
            total += _reach(list(av))
        elif name == "BRANCH":
            total += max(_reach(list(alt)) for alt in av[1])
        elif name in ("ASSERT", "ASSERT_NOT"):
            total += _reach(list(av[1]))
        elif name in codepoints.ONE_CHARACTER:
            total += 1
    return total
