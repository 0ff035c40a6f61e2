"""Hostile input for the contract models, as hypothesis strategies: random and adversarial JSON, invalid UTF-8,
control characters, deep nesting, payloads past NATS's max_payload, and near-valid payloads with one thing wrong.

tests/unit/test_hostile_contract.py runs them against the models, tests/e2e/test_hostile_input.py sends them to a
running stack.
"""
import json
import string
from collections.abc import Mapping
from datetime import UTC, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from pydantic import BaseModel

from engram_client.contract import MAX_K, MAX_QUERY_CHARS, MAX_TEXT_CHARS, MAX_TOKEN_BUDGET, Forget

MAX_PAYLOAD = 1024 * 1024     # nats-server's default max_payload
MAX_MESSAGE = 1000            # the longest error message a reply carries (engram_client/contract/failures.py)
ID_CHARS = string.ascii_letters + string.digits + "_.:@=+/-"
TENANT_CHARS = string.ascii_letters + string.digits + "_-"

# Pieces of hostile input -------------------------------------------------------------------------------------------

ADVERSARIAL_STRINGS = [
    "", " ", "\t", "\n", "\r\n", "\x00", "\x7f", "\u2028", "\u00a0", "\u200b", "\ufeff", "\u202eevil", "*", ">",
    ".", "..", "a.b", "a b", "mem.*.recall", "mem.>", "dlq", "unknown", "null", "None", "true", "0", "-1", "../..",
    "%00", "' OR 1=1 --", "{{7*7}}", "${jndi:ldap://x/a}", "\r\nPUB mem.x.recall 2\r\n{}\r\n", "😀" * 40,
    "a" * 65, "a" * 129, "x" * 2001, "x" * 16_001,
]
# Raw JSON fragments: not JSON at all, or JSON that strict parsers and lenient ones read differently.
JSON_ODDITIES = [
    "NaN", "Infinity", "-Infinity", "1e999999", "-1e999999", "-0", "01", "0x10", "1_000", ".5", "+1", "1.", "tru",
    "nul", "", "[]", "{}", "null", "[1,]", '{"a":1,}', '"abc', "'single'", '"\\ud800"', '"\\udfff\\ud800"',
    '"\\u0000"', '"\\uZZZZ"', '"\\x41"', "[", "{", "]", "}", ",", ":", "\x00", "\ufeff{}", "/* c */ 1", "true false",
    "9" * 5000, "-" + "9" * 5000, "1e-999999",
]
INVALID_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\x80",
                b"\xf4\x90\x80\x80"]
ZONES = [UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12)), timezone(timedelta(hours=5, minutes=45)),
         timezone(-timedelta(hours=23, minutes=59))]

control_chars = st.characters(categories=["Cc", "Cf", "Cs", "Zs", "Zl", "Zp"])


def sized(chars: str, low: int, high: int) -> SearchStrategy[str]:
    """A string of one of `chars` repeated low..high times: long inputs without hypothesis drawing each character."""
    return st.builds(lambda c, n: c * n, st.sampled_from(list(chars)), st.integers(low, high))


def hostile_strings(max_chars: int = 300_000) -> SearchStrategy[str]:
    """Strings a product should never send: control characters, lone surrogates, huge, wildcards, injections."""
    return st.one_of(
        st.text(),
        st.text(control_chars, min_size=1),
        st.sampled_from(ADVERSARIAL_STRINGS),
        sized("x字é💥\x00 \u202e", 1, max_chars),
    )


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(10**40), 10**40),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40))
json_values: SearchStrategy[Any] = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20)


def dumps(value: Any) -> str:
    """JSON text, keeping lone surrogates as they are (so encoding them gives invalid UTF-8)."""
    return json.dumps(value, ensure_ascii=False)


def encode(text: str) -> bytes:
    """UTF-8, with lone surrogates encoded as they are (CESU-8: invalid UTF-8)."""
    return text.encode("utf-8", "surrogatepass")


def nest(depth: int, shape: str, leaf: str = "1") -> str:
    """`depth` levels of arrays, objects or both around `leaf`."""
    if shape == "array":
        return "[" * depth + leaf + "]" * depth
    if shape == "object":
        return '{"a":' * depth + leaf + "}" * depth
    half = depth // 2
    return '{"a":[' * half + leaf + "]}" * half


def nested_texts(max_bytes: int = 1_200_000) -> SearchStrategy[str]:
    """Deeply nested JSON of at most max_bytes (parsers that recurse give up between 200 and 1,000 levels)."""
    return st.builds(nest, st.integers(1, max(1, max_bytes // 12)), st.sampled_from(["array", "object", "mixed"]))


def huge_arrays(max_bytes: int) -> SearchStrategy[str]:
    """A JSON array of up to max_bytes of short items (many ids)."""
    return st.builds(lambda item, n: "[" + ",".join([item] * n) + "]",
                     st.sampled_from(['"a"', "1", "null", '"00000000-0000-0000-0000-000000000000"', "[]", "{}"]),
                     st.integers(1, max(1, max_bytes // 8)))


def raw_control_strings() -> SearchStrategy[str]:
    """A JSON string with raw (unescaped) control characters inside: invalid JSON."""
    return st.text(control_chars, min_size=1, max_size=50).map(lambda s: '"' + s + '"')


def hostile_json_texts(max_bytes: int, extra: SearchStrategy[Any] | None = None) -> SearchStrategy[str]:
    """Raw JSON text for one field's value: valid JSON of any type, hostile strings, oddities, nesting, huge."""
    return st.one_of(
        json_values.map(dumps),
        hostile_strings(max_bytes // 4).map(dumps),
        st.sampled_from(JSON_ODDITIES),
        nested_texts(max_bytes),
        huge_arrays(max_bytes),
        raw_control_strings(),
        extra.map(dumps) if extra is not None else st.nothing(),
    )


# Valid field values, by field name (a field name means the same in every model) ------------------------------------

ids = st.text(ID_CHARS, min_size=1, max_size=128)
tenants = st.text(TENANT_CHARS, min_size=1, max_size=64).filter(lambda t: t != "dlq")
names = st.text(min_size=1, max_size=128)
aware_times = st.datetimes(timezones=st.sampled_from(ZONES)).map(lambda d: d.isoformat())
entry_ids = st.one_of(st.uuids().map(str), ids)


def texts(max_chars: int) -> SearchStrategy[str]:
    """Text that is mostly valid for a field of at most `max_chars` characters (any script, control characters)."""
    return st.one_of(st.text(min_size=1, max_size=200), sized("x字é💥 \u202e\x01", 1, max_chars + 2))


FIELDS: dict[str, SearchStrategy[Any]] = {
    "schema_version": st.just(1), "tenant_id": tenants, "query": texts(MAX_QUERY_CHARS), "user_id": ids,
    "conversation_id": ids, "turn_id": ids, "agent_id": ids, "k": st.integers(1, MAX_K),
    "token_budget": st.integers(1, MAX_TOKEN_BUDGET), "mode": st.sampled_from(["fast", "deep"]),
    "include_working_memory": st.booleans(), "include_superseded": st.booleans(), "explain": st.booleans(),
    "persons": st.lists(names, max_size=4), "topics": st.lists(names, max_size=4), "location": names,
    "since": aware_times, "until": aware_times, "speaker": names,
    "role": st.sampled_from(["user", "assistant", "system", "other"]), "text": texts(MAX_TEXT_CHARS),
    "ts": aware_times,
    "metadata": st.dictionaries(st.text(min_size=1, max_size=64),
                                st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=1024),
                                          st.floats(allow_nan=False, allow_infinity=False)), max_size=8),
    "entry_ids": st.lists(entry_ids, min_size=1, max_size=8), "ids": st.lists(entry_ids, max_size=8),
    "op": st.sampled_from(["list", "get", "history", "users", "conversations", "counts"]),
    "kind": st.sampled_from(["episodic", "fact", "profile"]), "limit": st.integers(1, 500), "cursor": entry_ids,
    "order": st.sampled_from(["id", "newest"]), "before": aware_times, "before_id": entry_ids, "after": ids,
    "jobs": st.lists(st.sampled_from(["merge", "supersede", "score", "forget", "profile"]), max_size=5),
    "into": tenants, "window_turns": st.integers(1, 64),
}
FIELDS["filters"] = st.fixed_dictionaries({}, optional={name: FIELDS[name] for name in
                                                        ("persons", "topics", "location", "since", "until")})


def valid_dicts(model: type[BaseModel], fields: Mapping[str, SearchStrategy[Any]]) -> SearchStrategy[dict[str, Any]]:
    """Payloads (as dicts) that are mostly valid for `model`: its required fields and any of its optional ones."""
    if model is Forget:  # exactly one subject
        return st.one_of([st.fixed_dictionaries({name: fields[name]}, optional={"tenant_id": fields["tenant_id"]})
                          for name in ("user_id", "conversation_id", "entry_ids")])
    required = {n: fields[n] for n, f in model.model_fields.items() if f.is_required()}
    optional = {n: fields[n] for n, f in model.model_fields.items() if not f.is_required()}
    return st.fixed_dictionaries(required, optional=optional)


@st.composite
def near_valid(draw: st.DrawFn, model: type[BaseModel], max_bytes: int,
               fields: Mapping[str, SearchStrategy[Any]], extra: SearchStrategy[Any] | None) -> bytes:
    """A mostly valid payload with at most one thing wrong: a field's value replaced by hostile JSON, a field
    removed, an unknown field added, or a field given twice; then encoded, perhaps wrongly."""
    parts = [(key, dumps(value)) for key, value in draw(valid_dicts(model, fields)).items()]
    change = draw(st.sampled_from(["none", "replace", "replace", "delete", "extra", "duplicate"]))
    names = sorted(model.model_fields)
    if change == "replace":
        name = draw(st.sampled_from(names))
        parts = [(k, v) for k, v in parts if k != name]
        parts.insert(draw(st.integers(0, len(parts))), (name, draw(hostile_json_texts(max_bytes, extra))))
    elif change == "delete" and parts:
        del parts[draw(st.integers(0, len(parts) - 1))]
    elif change == "extra":
        parts.append((draw(st.one_of(st.text(max_size=30), st.sampled_from(ADVERSARIAL_STRINGS))),
                      draw(hostile_json_texts(max_bytes, extra))))
    elif change == "duplicate":  # which one counts (the last, for pydantic) must not matter for safety
        name = draw(st.sampled_from(names))
        parts.append((name, draw(st.one_of(fields[name].map(dumps) if name in fields else st.nothing(),
                                           hostile_json_texts(max_bytes, extra)))))
    text = "{" + ", ".join(f"{dumps(key)}: {value}" for key, value in parts) + "}"
    how = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16", "corrupt"]))
    data = text.encode("utf-16", "surrogatepass") if how == "utf-16" else encode(text)
    if how == "corrupt":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from(INVALID_UTF8)) + data[at:]
    return data[:max_bytes]


def huge_payloads(model: type[BaseModel], max_bytes: int) -> SearchStrategy[bytes]:
    """A JSON object whose one field is a string or an array of up to max_bytes."""
    def build(name: str, value: str) -> bytes:
        return encode("{" + dumps(name) + ": " + value + "}")[:max_bytes]

    return st.builds(build, st.sampled_from(sorted(model.model_fields)),
                     st.one_of(sized("xé字\\", max_bytes // 8, max_bytes // 4 - 64).map(dumps),
                               huge_arrays(max_bytes - 64)))


def hostile_payloads(model: type[BaseModel], *, max_bytes: int = MAX_PAYLOAD + 65_536,
                     fields: Mapping[str, SearchStrategy[Any]] | None = None,
                     extra: SearchStrategy[Any] | None = None) -> SearchStrategy[bytes]:
    """Bytes to send where `model` is expected: mostly near-valid payloads, then random bytes, random JSON, deep
    nesting and huge payloads, none longer than max_bytes.

    Args:
        fields: valid values by field name, replacing FIELDS' (e.g. another tenant's ids, to widen a scope).
        extra: more hostile values a field may be given.
    """
    merged = {**FIELDS, **(fields or {})}
    return st.one_of(
        near_valid(model, max_bytes, merged, extra), near_valid(model, max_bytes, merged, extra),
        near_valid(model, max_bytes, merged, extra),
        st.binary(max_size=2048),
        json_values.map(lambda v: encode(dumps(v))),
        nested_texts(max_bytes).map(encode),
        huge_payloads(model, max_bytes),
    )


# Hypothesis settings for a property -------------------------------------------------------------------------------

BASE = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def quick(max_examples: int) -> settings:
    """Settings for a property: no deadline (payloads reach a megabyte), no example database in the repository."""
    return settings(BASE, max_examples=max_examples)
