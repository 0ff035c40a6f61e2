"""`python -m bench.patterns [--max-chars N] [--top N]`: engram's regular expressions on inputs built to make each
one work hardest, slowest first.

Every compiled pattern engram holds is found by introspection (each module of shared/, services/ and engram_client,
its globals, its classes' attributes and what its containers hold), so a new pattern is measured without anyone
listing it. Its inputs come from its own source: the parser's tree gives the literals, characters and alternatives
it can match, and each repetition is pumped with them (what leads to it, its body many times over, then a character
that makes the match fail), tiled (the lead and the body again and again, so that every start position works) and
mixed at random, at lengths doubling from 32 characters to the longest turn text the contract allows (the table
shows the length of the slowest call). A call that runs past `--cap-s` is stopped there. The functions that read
text through the patterns (`drivers`) run on turns made of the patterns' pieces (`driver_texts`), since a rule
slices and searches the text it was given as well. tests/unit/test_pattern_guard.py runs the same inputs.
"""
import argparse
import functools
import importlib
import json
import pkgutil
import random
import re
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from rich.console import Console
from rich.table import Table

from engram_client.contract.base import MAX_TEXT_CHARS

_parser: Any = importlib.import_module("re._parser")  # the standard library's own reading of a pattern
PACKAGES = ("shared", "services", "engram_client")
CAP_S = 2.0          # a call is stopped after this long: a pattern that slow is caught whatever its exact time
MAX_FAMILIES = 48    # inputs per pattern: enough to pump every repetition of the largest rule
_FAIL = "\x01"       # no pattern of engram matches it, so a match that reached it has to give up
# Characters tried for a class, first those most text has; a negated class gets the first it does not exclude.
_UNIVERSE = ("a", " ", "中", "A", "0", "é", "_", ",", ".", "?", "-", "'", "\n", "!", "的", "Z", "9", "ß")
_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0", "CATEGORY_NOT_DIGIT": "a", "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "a",
    "CATEGORY_WORD": "a", "CATEGORY_NOT_WORD": " ", "CATEGORY_LINEBREAK": "\n", "CATEGORY_NOT_LINEBREAK": "a",
}


@dataclass(frozen=True)
class Found:
    """A compiled pattern engram holds, where it was found, and its source in Python's syntax when known."""

    where: str
    pattern: Any
    source: str
    flags: int


def _is_pattern(obj: object) -> bool:
    """A compiled pattern of re, regex or re2, or anything that answers like one (engram's own wrapper)."""
    return (isinstance(obj, re.Pattern) or (callable(getattr(obj, "finditer", None))
                                           and callable(getattr(obj, "search", None))
                                           and isinstance(getattr(obj, "pattern", None), str)))


def modules() -> list[ModuleType]:
    """Every module of engram's packages, imported (nothing connects at import time)."""
    out = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        out.append(package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if not info.name.endswith(".__main__"):  # a command line runs when imported
                out.append(importlib.import_module(info.name))
    return out


def _walk(obj: object, where: str, depth: int, seen: set[int]) -> Iterator[tuple[str, object]]:
    if id(obj) in seen or depth > 4:
        return
    seen.add(id(obj))
    if _is_pattern(obj):
        yield where, obj
        return
    if isinstance(obj, dict):
        for key, value in list(obj.items()):
            yield from _walk(value, f"{where}[{key!r}]", depth + 1, seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for i, value in enumerate(obj):
            yield from _walk(value, f"{where}[{i}]", depth + 1, seen)
    elif isinstance(obj, type) or _engram_object(obj):
        for key, value in list(vars(obj).items()):
            if not key.startswith("__"):
                yield from _walk(value, f"{where}.{key}", depth + 1, seen)


def _engram_object(obj: object) -> bool:
    """An instance of one of engram's own classes (a dataclass of patterns, a reader), not a module or function."""
    module = getattr(type(obj), "__module__", "") or ""
    return module.split(".")[0] in PACKAGES and hasattr(obj, "__dict__") and not callable(obj)


def discover() -> list[Found]:
    """Every compiled pattern reachable from engram's modules, each once, named where it is defined."""
    mods = modules()
    named: dict[int, tuple[str, object]] = {}
    for module in sorted(mods, key=lambda m: m.__name__):
        defined = _defined_names(module)
        for key, value in list(vars(module).items()):
            if key.startswith("__") or isinstance(value, ModuleType):
                continue
            if isinstance(value, type) and value.__module__ != module.__name__:
                continue  # a class imported from elsewhere is walked in its own module
            for where, obj in _walk(value, f"{module.__name__}.{key}", 0, set()):
                if id(obj) not in named or key in defined:
                    named[id(obj)] = (where, obj)
    found = []
    for where, obj in sorted(named.values(), key=lambda item: item[0]):
        source, flags = _source(obj)
        found.append(Found(where, obj, source, flags))
    return found


def _defined_names(module: ModuleType) -> frozenset[str]:
    """Names a module assigns itself at the top level (so an imported pattern is named where it is made)."""
    try:
        text = Path(module.__file__ or "").read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    return frozenset(re.findall(r"^([A-Za-z_][A-Za-z_0-9]*)\s*(?::[^=\n]*)?=", text, re.MULTILINE))


def _source(obj: Any) -> tuple[str, int]:
    """The pattern's source in Python's syntax and its flags (engram's wrapper keeps both as written)."""
    source = getattr(obj, "python_source", None) or obj.pattern
    flags = getattr(obj, "python_flags", None)
    if flags is None:
        flags = obj.flags if isinstance(obj, re.Pattern) else 0
    return source, int(flags)


# Inputs from a pattern's own pieces.


@dataclass
class Pieces:
    """What a pattern can match, read from its tree: samples of every part, and its repetitions to pump."""

    samples: list[str] = field(default_factory=list)
    pumps: list[tuple[str, list[str], list[str]]] = field(default_factory=list)  # (lead, bodies, what comes next)


def _class_chars(items: list[tuple[Any, Any]]) -> list[str]:
    """Characters a class `[...]` matches: its own literals and range ends, else ones from `_UNIVERSE`."""
    negate = any(str(op) == "NEGATE" for op, _ in items)
    own: list[str] = []
    for op, av in items:
        if str(op) == "LITERAL":
            own.append(chr(av))
        elif str(op) == "RANGE":
            own += [chr(av[0]), chr(av[1])]
        elif str(op) == "CATEGORY":
            own.append(_CATEGORY_CHARS.get(str(av), "a"))
    if not negate:
        return list(dict.fromkeys(own))[:6]
    return [c for c in _UNIVERSE if not _in_class(c, items)][:6] or ["a"]


def _in_class(char: str, items: list[tuple[Any, Any]]) -> bool:
    for op, av in items:
        name = str(op)
        if (name == "LITERAL" and char == chr(av)) or (name == "RANGE" and av[0] <= ord(char) <= av[1]):
            return True
        if name == "CATEGORY":
            pattern = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
                       "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}.get(str(av))
            if pattern and re.fullmatch(pattern, char):
                return True
    return False


def _samples(seq: Any, limit: int = 12) -> list[str]:
    """Up to `limit` strings the subpattern matches (variant i takes the i-th sample of each part)."""
    parts = [_node_samples(op, av, limit) for op, av in seq]
    parts = [p for p in parts if p]
    if not parts:
        return [""]
    width = min(limit, max(len(p) for p in parts))
    return list(dict.fromkeys("".join(p[i % len(p)] for p in parts) for i in range(width)))


def _node_samples(op: Any, av: Any, limit: int) -> list[str]:
    name = str(op)
    if name == "LITERAL":
        return [chr(av)]
    if name == "NOT_LITERAL":
        return [next(c for c in _UNIVERSE if c != chr(av))]
    if name == "ANY":
        return ["a", "中"]
    if name == "IN":
        return _class_chars(av)
    if name == "CATEGORY":
        return [_CATEGORY_CHARS.get(str(av), "a")]
    if name == "BRANCH":
        alternatives = [_samples(alt, limit) for alt in av[1]]
        return list(dict.fromkeys(s for i in range(limit) for alt in alternatives if i < len(alt)
                                  for s in [alt[i]]))[:limit]
    if name == "SUBPATTERN":
        return _samples(av[3], limit)
    if name == "ATOMIC_GROUP":
        return _samples(av, limit)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, high, body = av
        bodies = _samples(body, limit)
        count = max(low, 1) if high else 0
        out = [b * count for b in bodies]
        if high >= 2 and count < 2:
            out += [b * 2 for b in bodies[:2]]
        return out
    if name == "ASSERT" and av[0] < 0:
        return _samples(av[1], limit)  # a lookbehind's text stands just before: put it there
    return [""]  # lookaheads, negative assertions, anchors and group references match no text of their own


@functools.lru_cache(maxsize=1024)
def pieces(source: str, flags: int) -> Pieces:
    """The samples and repetitions of a pattern in Python's syntax (nothing, if the parser cannot read it)."""
    found = Pieces()
    try:
        tree = _parser.parse(source, flags)
    except (re.error, TypeError, ValueError, RecursionError):
        return found
    found.samples = _samples(list(tree))
    _pumps(list(tree), "", found)
    return found


def _pumps(seq: list[tuple[Any, Any]], lead: str, found: Pieces) -> None:
    """Record every repetition that may run long, with the text that leads to it and samples of what comes next."""
    for i, (op, av) in enumerate(seq):
        name = str(op)
        before = lead + "".join(_samples(seq[:i], 1))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            _, high, body = av
            if high > 50:
                found.pumps.append((before, _samples(body), _samples(seq[i + 1:i + 2], 3)))
            _pumps(list(body), before, found)
        elif name == "BRANCH":
            for alt in av[1]:
                _pumps(list(alt), before, found)
        elif name == "SUBPATTERN":
            _pumps(list(av[3]), before, found)
        elif name == "ATOMIC_GROUP":
            _pumps(list(av), before, found)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _pumps(list(av[1]), before, found)


Family = tuple[str, Callable[[int], str]]


def _repeat(unit: str, length: int, end: str = "") -> str:
    if not unit:
        return end
    return (unit * (length // len(unit) + 1))[:max(0, length - len(end))] + end


def _pumped(lead: str, unit: str) -> Callable[[int], str]:
    """`lead`, then `unit` over and over, then a character that fails: a repetition made to run long."""
    return lambda n: lead + _repeat(unit, n - len(lead), _FAIL)


def _tiled(unit: str) -> Callable[[int], str]:
    """`unit` over and over, then a character that fails: every start position leads somewhere."""
    return lambda n: _repeat(unit, n, _FAIL)


def _mixed(words: list[str], seed: int) -> Callable[[int], str]:
    return lambda n: _mix(words, n, seed)


def families(found: Found, seed: int = 0) -> list[Family]:
    """Inputs for one pattern, each a function of the length wanted: pumped, tiled and mixed pieces, taken in turn
    from each kind so that every kind is tried when there are more than `MAX_FAMILIES`."""
    parts = pieces(found.source, found.flags)
    straight: list[Family] = []
    onward: list[Family] = []
    tiles: list[Family] = []
    for lead, bodies, following in parts.pumps:
        straight += [(f"pump {body!r}", _pumped(lead, body)) for body in bodies]
        if len(bodies) >= 2:
            straight.append((f"pump {bodies[0] + bodies[1]!r}", _pumped(lead, bodies[0] + bodies[1])))
        # What comes next inside the run: "(1999 1999 1999..." for a note with a year.
        onward += [(f"pump {body + nxt!r}", _pumped(lead, body + nxt)) for body in bodies[:2] for nxt in following[:2]]
        tiles += [(f"tile {lead + body * times!r}", _tiled(lead + body * times)) for body in bodies[:3]
                  for times in (1, 8)]
    tiles += [(f"tile {unit!r}", _tiled(unit)) for sample in parts.samples[:6]
              for unit in (sample, sample + " ", sample[:-1])]
    words = [s for s in parts.samples if s] + [b for _, bodies, _ in parts.pumps for b in bodies]
    mixes: list[Family] = [(f"mix {i}", _mixed(words, seed + i)) for i in range(3)]
    unique: dict[str, Family] = {}
    kinds = [straight, onward, tiles, mixes]
    for i in range(max(map(len, kinds))):
        for kind in kinds:
            if i < len(kind):
                name, build = kind[i]
                unique.setdefault(build(200), (name[:60], build))
    return list(unique.values())[:MAX_FAMILIES]


def _mix(words: list[str], length: int, seed: int) -> str:
    """Pieces of the pattern in random order, some with a space or a failing character between them."""
    rng = random.Random(seed)
    pool = [w for w in words if w] or ["a"]
    out: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(pool) + rng.choice(("", "", " ", _FAIL))
        out.append(word)
        size += len(word)
    return "".join(out)[:length]


# Timing.


class Overtime(Exception):
    """A call ran past the cap and was stopped."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Overtime


def timed(call: Callable[[], object], cap_s: float = CAP_S) -> float:
    """Seconds one call takes, at most `cap_s` (Python's matcher checks signals as it goes; RE2 returns first).

    A timer already running (pytest-timeout's) is put back afterwards, less the time this took.
    """
    previous = signal.signal(signal.SIGALRM, _stop)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, cap_s)
    start = time.perf_counter()
    try:
        call()
    except Overtime:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        elapsed = time.perf_counter() - start
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - elapsed, 0.001))
    return elapsed


def operations(pattern: Any) -> list[tuple[str, Callable[[str], object]]]:
    """How engram calls a pattern: all its matches (search, split and sub work the same way) and a whole match."""

    def every(text: str) -> object:
        return sum(1 for _ in pattern.finditer(text))

    def whole(text: str) -> object:
        return pattern.fullmatch(text)

    return [("finditer", every), ("fullmatch", whole)]


@dataclass(frozen=True)
class Worst:
    """The slowest call found for one pattern or function."""

    where: str
    length: int
    seconds: float
    family: str
    operation: str
    engine: str = ""


def measure(found: Found, lengths: list[int], cap_s: float = CAP_S) -> Worst:
    """The slowest call of one pattern over its input families at the given lengths (longer stop once capped)."""
    engine = getattr(found.pattern, "engine", type(found.pattern).__module__)
    worst = Worst(found.where, 0, 0.0, "", "", engine)
    for name, build in families(found):
        for length in lengths:
            text = build(length)
            slowest = 0.0
            for op_name, op in operations(found.pattern):
                seconds = timed(functools.partial(op, text), cap_s)
                slowest = max(slowest, seconds)
                if seconds > worst.seconds:
                    worst = Worst(found.where, len(text), seconds, name, op_name, engine)
            if slowest >= cap_s:
                break
    return worst


# The functions that read text through the patterns.


def drivers() -> list[tuple[str, Callable[[str], object]]]:
    """Functions of engram that take a chat turn or a question and read it with patterns, each as text -> result."""
    from engram_client.contract import Turn
    from shared.compress import dates, extract, summary
    from shared.compress.facts import chinese, english, extractor, render
    from shared.compress.facts.fact import Fact
    from shared.compress.model import Window
    from shared.compress.offline import OfflineCompressor
    from shared.consolidation import importance, merge
    from shared.evidence import figures
    from shared.llm import client, schemas
    from shared.retrieval import plan, tense
    from shared.store import MemoryEntry

    ts = datetime(2024, 5, 8, 10, tzinfo=UTC)

    def turn(text: str) -> Turn:
        return Turn(conversation_id="c", turn_id="t", speaker="Ana", role="user", text=text, ts=ts)

    def entry(text: str) -> MemoryEntry:
        return MemoryEntry(id="e", tenant_id="t", conversation_id="c", text=text, occurred_at=ts, created_at=ts,
                           updated_at=ts, persons=["Ana", "Bo", "Cy"])

    def parse(text: str) -> object:
        try:
            return client.parse(text, schemas.CompressedWindow)
        except ValueError as exc:
            return str(exc)

    compressor = OfflineCompressor()
    return [
        ("facts_in_turn en", lambda t: extractor.facts_in_turn(turn(t), "en")),
        ("facts_in_turn zh", lambda t: extractor.facts_in_turn(turn(t), "zh")),
        ("english.sentences", english.sentences),
        ("chinese.sentences", chinese.sentences),
        ("OfflineCompressor", lambda t: compressor.compress_sync(
            Window(tenant_id="t", conversation_id="c", turns=[turn(t)], context=[turn(t)]))),
        ("dates.resolve en", lambda t: dates.resolve(t, "en", ts)),
        ("dates.resolve zh", lambda t: dates.resolve(t, "zh", ts)),
        ("extract", lambda t: (extract.persons(["Ana"], [t]), extract.entities([t]), extract.keywords([t]))),
        ("summary.extractive", lambda t: summary.extractive("", [turn(t)], 120)),
        ("plan.plan", lambda t: plan.plan(t, ts)),
        ("tense", lambda t: (tense.read(t, "en"), tense.read(t, "zh"), tense.topic(t))),
        ("figures", lambda t: (figures.asked(t), figures.stated(entry(t)),
                               figures.stated(entry(t), frozenset({"p95"})))),
        ("importance", lambda t: (importance.importance(entry(t)), importance.small_talk(entry(t)))),
        ("merge.content_words", merge.content_words),
        ("render", lambda t: (render.without_stated(t), render.keywords_of(Fact("plan:x", t, t)))),
        ("llm parse", parse),
    ]


def driver_text(all_found: list[Found], length: int, seed: int) -> str:
    """A turn made of every pattern's pieces at random: what a chat message that hunts for slow rules looks like
    (without lone surrogates, which no turn holds: the contract refuses text that is not Unicode)."""
    words = [s for f in all_found for s in pieces(f.source, f.flags).samples if s and s.isprintable()]
    return _mix(words, length, seed)


def driver_texts(all_found: list[Found], length: int) -> dict[str, str]:
    """Turns for the functions: every pattern's pieces mixed at random, and the fact rules' pieces in one sentence
    that never stops and in sentences of a few hundred characters (every few words a hit the rules look around)."""
    stops = set(".!?。！？\n")
    said = [s for f in all_found if f.where.startswith("shared.compress.facts.")
            for s in pieces(f.source, f.flags).samples if s.strip() and s.isprintable() and not set(s) & stops]
    run_on = _repeat(" ".join(said) + " ", length)
    sentences = _repeat(". ".join(run_on[i:i + 600] for i in range(0, min(length, 6000), 600)) + ". ", length)
    texts = {f"mixed pieces {seed}": driver_text(all_found, length, seed) for seed in range(3)}
    return {**texts, "the rules' pieces in one sentence": run_on, "the rules' pieces in sentences": sentences}


def measure_driver(name: str, call: Callable[[str], object], texts: dict[str, str], cap_s: float = CAP_S) -> Worst:
    """The slowest of one function's calls over the texts, after one call that loads what it loads once (the
    language model, dateparser's tables)."""
    call("I moved to Lisbon yesterday. 我昨天搬到了上海。")
    worst = Worst(name, 0, 0.0, "", name)
    for kind, text in texts.items():
        seconds = timed(functools.partial(call, text), cap_s)
        if seconds > worst.seconds:
            worst = Worst(name, len(text), seconds, kind, name)
    return worst


def lengths_up_to(max_chars: int) -> list[int]:
    """Input lengths from 32 characters, doubling, to `max_chars` (exponential patterns are caught short)."""
    out = [32]
    while out[-1] * 2 < max_chars:
        out.append(out[-1] * 2)
    return [*out, max_chars]


def main() -> None:
    """Measure every pattern and print the slowest, then the figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.patterns", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-chars", type=int, default=MAX_TEXT_CHARS, help="longest input (the contract's turn)")
    parser.add_argument("--top", type=int, default=10, help="rows of the table")
    parser.add_argument("--cap-s", type=float, default=CAP_S, help="a call is stopped after this long")
    parser.add_argument("--only", default="", help="measure the patterns whose location contains this")
    args = parser.parse_args()
    lengths = lengths_up_to(args.max_chars)
    all_found = discover()
    results = [measure(f, lengths, args.cap_s) for f in all_found if args.only in f.where]
    texts = driver_texts(all_found, args.max_chars)
    results += [measure_driver(name, call, texts, args.cap_s) for name, call in drivers() if args.only in name]
    results.sort(key=lambda w: -w.seconds)
    table = Table(title=f"The slowest of {len(all_found)} patterns and {len(drivers())} functions "
                        f"(inputs up to {args.max_chars:,} characters, calls stopped at {args.cap_s:g} s)")
    table.add_column("pattern or function")
    table.add_column("engine")
    table.add_column("worst input length", justify="right")
    table.add_column("time", justify="right")
    table.add_column("input")
    table.add_column("call")
    for worst in results[:args.top]:
        shown = f">= {worst.seconds:.2f} s" if worst.seconds >= args.cap_s else f"{worst.seconds * 1000:.1f} ms"
        table.add_row(worst.where, worst.engine, f"{worst.length:,}", shown, worst.family[:40], worst.operation)
    Console(width=200).print(table)
    print(json.dumps([w.__dict__ for w in results]))


if __name__ == "__main__":
    main()
