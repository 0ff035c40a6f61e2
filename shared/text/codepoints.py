"""Sets of code points, as sorted ranges, with Python's meaning: what `\\d`, `\\s`, `\\w` and a pattern's
one-character parts match. The pattern engines' checks compare them (can a run start where the one before it ended?)
and RE2's translation writes them out, so that both read text as Python's `re` does.
"""
import array
import bisect
import functools
import re
from typing import Any

MAX_CODE_POINT = 0x10FFFF
REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")  # the parser's names for a repetition
ONE_CHARACTER = ("LITERAL", "NOT_LITERAL", "IN", "CATEGORY", "ANY")  # and for what matches one character
Ranges = list[tuple[int, int]]


class Unsupported(Exception):
    """A part of a pattern whose meaning is not written out here (RE2 does without it, the checks assume the worst)."""


def one_character(seq: list[tuple[Any, Any]], flags: int) -> Ranges | None:
    """The code points a one-character element matches (case folding aside), or None if it is not one."""
    if len(seq) != 1:
        return None
    name, av = str(seq[0][0]), seq[0][1]
    if name == "LITERAL":
        return [(av, av)]
    if name == "NOT_LITERAL":
        return complement([(av, av)])
    if name == "ANY":
        return [(0, MAX_CODE_POINT)] if flags & re.DOTALL else complement([(10, 10)])
    if name == "CATEGORY":
        return category(str(av), flags)
    if name == "IN":
        try:
            return class_ranges(av, flags)
        except Unsupported:
            return [(0, MAX_CODE_POINT)]
    return None


def folds(seq: list[tuple[Any, Any]]) -> bool:
    """Whether ignoring case may widen what a one-character element matches (categories are never folded)."""
    name, av = str(seq[0][0]), seq[0][1]
    if name in ("LITERAL", "NOT_LITERAL"):
        return is_cased([(av, av)])
    if name == "IN":
        return is_cased([r for op, item in av if str(op) in ("LITERAL", "RANGE")
                          for r in ([(item, item)] if str(op) == "LITERAL" else [item])])
    return False


def is_cased(ranges: Ranges) -> bool:
    return any(hi - lo > 2048 or any(chr(c).lower() != chr(c).upper() for c in range(lo, hi + 1))
               for lo, hi in ranges)


def within(small: Ranges, large: Ranges) -> bool:
    """Whether every code point of `small` is in `large` (sorted and merged)."""
    for lo, hi in small:
        at = bisect.bisect_right(large, (lo, MAX_CODE_POINT + 1)) - 1
        if at < 0 or large[at][1] < hi:
            return False
    return True


def overlaps(a: Ranges, b: Ranges) -> bool:
    small, large = (a, b) if len(a) <= len(b) else (b, a)  # both sorted and merged, as every set here is
    for lo, hi in small:
        at = bisect.bisect_right(large, (hi, MAX_CODE_POINT + 1)) - 1  # the last range starting at or before hi
        if at >= 0 and large[at][1] >= lo:
            return True
    return False


def holds(ranges: list[tuple[int, int]], code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in ranges)


def class_ranges(items: list[tuple[Any, Any]], flags: int) -> list[tuple[int, int]]:
    """The code points a `[...]` holds, with Python's meaning of its categories."""
    return _class_of(tuple((str(op), av) for op, av in items), bool(flags & re.ASCII))


@functools.lru_cache(maxsize=4096)
def _class_of(items: tuple[tuple[str, Any], ...], ascii_only: bool) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    negate = False
    flags = re.ASCII if ascii_only else 0
    for name, av in items:
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            ranges.append((av, av))
        elif name == "RANGE":
            ranges.append((av[0], av[1]))
        elif name == "CATEGORY":
            ranges += category(str(av), flags)
        else:
            raise Unsupported(name)
    ranges = union(ranges)
    return complement(ranges) if negate else ranges


def category(name: str, flags: int) -> list[tuple[int, int]]:
    """`\\d`, `\\s`, `\\w` and their negations as Python matches them (Unicode unless ASCII is asked for)."""
    if name.startswith(("CATEGORY_LOC_", "CATEGORY_UNI_")) or "LINEBREAK" in name:
        raise Unsupported(name)
    return category_of(name, bool(flags & re.ASCII))


@functools.lru_cache(maxsize=16)
def category_of(name: str, ascii_only: bool) -> list[tuple[int, int]]:
    if name == "CATEGORY_NOT_SPACE_OR_DIGIT":
        uncased = category_of("CATEGORY_SPACE", ascii_only) + category_of("CATEGORY_DIGIT", ascii_only)
        return complement(union(uncased))
    found = _categories(ascii_only)[name.replace("_NOT", "")]
    return complement(found) if "_NOT_" in name else found


@functools.cache
def _categories(ascii_only: bool) -> dict[str, list[tuple[int, int]]]:
    """The code points Python's own engine gives each category, read off every code point once."""
    every = array.array("I", range(MAX_CODE_POINT + 1)).tobytes().decode("utf-32-le", "surrogatepass")
    flags = re.ASCII if ascii_only else 0
    return {name: [(m.start(), m.end() - 1) for m in re.finditer(source, every, flags)]
            for name, source in (("CATEGORY_DIGIT", r"\d+"), ("CATEGORY_SPACE", r"\s+"), ("CATEGORY_WORD", r"\w+"))}


def join(*sets: Ranges) -> Ranges:
    """The union of sets of code points; most unions here join the same few sets, so each is made once."""
    unique = {id(s): s for s in sets if s}
    if len(unique) <= 1:
        return next(iter(unique.values()), [])
    key = tuple(sorted(unique))
    if key not in _JOINED:
        if len(_JOINED) > 4096:
            _JOINED.clear()
        # The sets are kept with their union, so that no id in a key is reused while it is there.
        _JOINED[key] = (list(unique.values()), union([r for s in unique.values() for r in s]))
    return _JOINED[key][1]


_JOINED: dict[tuple[int, ...], tuple[list[Ranges], Ranges]] = {}


def union(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, start = [], 0
    for lo, hi in union(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return out


def minus(ranges: list[tuple[int, int]], removed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    keep = complement(removed)
    out = [(max(lo, klo), min(hi, khi)) for lo, hi in union(ranges) for klo, khi in keep]
    return [(lo, hi) for lo, hi in out if lo <= hi]
