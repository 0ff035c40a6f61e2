"""Hostile input against every contract model, with hypothesis (no broker).

Whatever bytes arrive (random or adversarial JSON, invalid UTF-8, control characters, deep nesting, payloads past
NATS's max_payload), a request model either parses them or refuses them with a pydantic ValidationError whose wire
error is `invalid_request` with a short message; ids and tenant ids with a character outside their alphabet or
too many characters are refused; subjects parse without raising, and a hostile tenant token never parses into
another valid tenant.

The strategies below are public: tests/e2e/test_hostile_input.py sends the same payloads to a running stack. Each
property counts the inputs it ran (TRIED); `pytest -s` prints the total when the module ends. Properties for the
The last tests pin the bugs these properties caught that 9db9cbb fixed.
"""
import json
import string
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from pydantic import BaseModel, ValidationError

from engram_client import subjects
from engram_client.contract import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOKEN_BUDGET,
    ConsolidateRequest,
    EntriesRequest,
    Flush,
    Forget,
    RebuildRequest,
    RecallFilters,
    RecallRequest,
    Turn,
    check_tenant,
    validate_tenant,
)
from engram_client.contract.failures import error_body
from engram_client.errors import EngramError, Forbidden, InvalidRequest, NotFound, Timeout, Unavailable
from shared.consolidation.forget import about, turns_among

MAX_PAYLOAD = 1024 * 1024     # nats-server's default max_payload
MAX_MESSAGE = 1000            # the longest error message a reply carries (engram_client/contract/failures.py)
REQUEST_MODELS: tuple[type[BaseModel], ...] = (RecallRequest, RecallFilters, Turn, Flush, Forget, EntriesRequest,
                                               ConsolidateRequest, RebuildRequest)
ID_CHARS = string.ascii_letters + string.digits + "_.:@=+/-"
TENANT_CHARS = string.ascii_letters + string.digits + "_-"
KINDS = ("turns", "flush", "recall", "entries", "forget", "consolidate")
TRIED: Counter[str] = Counter()   # inputs run per property

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
    "op": st.sampled_from(["list", "get", "history"]), "kind": st.sampled_from(["episodic", "fact", "profile"]),
    "limit": st.integers(1, 500), "cursor": entry_ids,
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


# The properties ----------------------------------------------------------------------------------------------------

BASE = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def quick(max_examples: int) -> settings:
    """Settings for a property: no deadline (payloads reach a megabyte), no example database in the repository."""
    return settings(BASE, max_examples=max_examples)


@pytest.fixture(scope="module", autouse=True)
def _summary(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print how many hostile inputs the module's properties ran, and how many properties failed."""
    failed_before = request.session.testsfailed
    yield
    failed = request.session.testsfailed - failed_before
    print(f"\nhostile inputs (contract models): {sum(TRIED.values())} tried, {failed} failing properties; "
          + ", ".join(f"{name} {count}" for name, count in sorted(TRIED.items())))


def check_refusal(model: type[BaseModel], exc: ValidationError) -> None:
    """A refusal goes on the wire as a short invalid_request that names the model."""
    body = error_body(exc)
    assert body.code == "invalid_request"
    assert 0 < len(body.message) <= MAX_MESSAGE
    assert body.message.startswith(f"invalid {model.__name__}: "), body.message


@pytest.mark.parametrize("model", REQUEST_MODELS, ids=lambda m: m.__name__)
@quick(300)
@given(data=st.data())
def test_any_bytes_parse_into_the_model_or_are_refused_with_a_short_invalid_request(
        model: type[BaseModel], data: st.DataObject) -> None:
    """model_validate_json never raises anything but ValidationError, and what it accepts serializes stably."""
    payload = data.draw(hostile_payloads(model), label="payload")
    TRIED[f"bytes->{model.__name__}"] += 1
    try:
        parsed = model.model_validate_json(payload)
    except ValidationError as exc:
        event(f"refused: {exc.errors()[0]['type']}")
        check_refusal(model, exc)
        return
    event("accepted")
    assert isinstance(parsed, model)
    dumped = parsed.model_dump_json()
    assert model.model_validate_json(dumped).model_dump_json() == dumped


@quick(300)
@given(value=json_values, model=st.sampled_from(REQUEST_MODELS))
def test_any_json_value_validates_or_is_refused(value: Any, model: type[BaseModel]) -> None:
    """model_validate on any decoded JSON value (as a test or the CLI builds requests) raises only ValidationError."""
    TRIED["json-value"] += 1
    try:
        model.model_validate(value)
    except ValidationError as exc:
        check_refusal(model, exc)


ID_PLACES: list[tuple[type[BaseModel], str, dict[str, Any]]] = [
    (Turn, "conversation_id", {}), (Turn, "turn_id", {}), (Turn, "user_id", {}), (Turn, "agent_id", {}),
    (Flush, "conversation_id", {}), (RecallRequest, "user_id", {"query": "q"}),
    (RecallRequest, "conversation_id", {"query": "q"}), (Forget, "user_id", {}), (Forget, "conversation_id", {}),
    (EntriesRequest, "user_id", {}), (EntriesRequest, "conversation_id", {}), (ConsolidateRequest, "user_id", {}),
]
# Entry ids are UUIDs besides (the stores address entries by UUID).
ENTRY_ID_PLACES: list[tuple[type[BaseModel], str, dict[str, Any]]] = [
    (Forget, "entry_ids", {}), (EntriesRequest, "ids", {}), (EntriesRequest, "cursor", {}),
]
TURN: dict[str, Any] = {"conversation_id": "c1", "turn_id": "t1", "speaker": "Ana", "role": "user",
                        "text": "I moved to Lisbon.", "ts": "2023-05-08T13:56:00+01:00"}
BAD_CHARS = [" ", "\t", "\n", "\r", "\x00", "\x1b", "\x7f", "\u0085", "\u00a0", "\u2028", "\u200b", "*", ">", "é",
             "字", "\\", '"', "'", "#", "%", "?", "!", ",", ";", "$", "~", "😀", "\ud800"]


def with_bad_char(alphabet: str) -> SearchStrategy[str]:
    """A string over `alphabet` with at least one character outside it."""
    bad = st.one_of(st.sampled_from(BAD_CHARS), st.characters().filter(lambda c: c not in alphabet))
    return st.builds(lambda head, c, tail: head + c + tail, st.text(alphabet, max_size=40), bad,
                     st.text(alphabet, max_size=40))


bad_ids = st.one_of(with_bad_char(ID_CHARS), st.text(ID_CHARS, min_size=129, max_size=5_000),
                    sized(ID_CHARS, 129, 1_000_000), st.just(""))


def id_payload(model: type[BaseModel], name: str, base: dict[str, Any], value: str) -> bytes:
    """A payload valid but for the id `value` in field `name`."""
    payload = {**(TURN if model is Turn else {}), **base, name: [value] if name in ("entry_ids", "ids") else value}
    if model is EntriesRequest and name == "ids":
        payload["op"] = "get"
    return encode(dumps(payload))


@quick(400)
@given(place=st.sampled_from(ID_PLACES), value=bad_ids)
def test_an_id_with_a_character_outside_its_alphabet_or_too_long_is_refused(
        place: tuple[type[BaseModel], str, dict[str, Any]], value: str) -> None:
    """Ids go into NATS message ids and KV keys: whitespace, control characters, wildcards, over 128 characters or
    empty are refused, by the field that holds them."""
    model, name, base = place
    TRIED["bad-id"] += 1
    with pytest.raises(ValidationError) as info:
        model.model_validate_json(id_payload(model, name, base, value))
    where = {str(part) for err in info.value.errors() for part in err["loc"]}
    is_json_error = any(err["type"] == "json_invalid" for err in info.value.errors())  # a lone surrogate
    assert name in where or is_json_error, info.value.errors()
    check_refusal(model, info.value)


@quick(200)
@given(place=st.sampled_from(ID_PLACES), value=ids)
def test_an_id_of_its_alphabet_is_kept_as_given(place: tuple[type[BaseModel], str, dict[str, Any]],
                                                  value: str) -> None:
    """Every 1-128 character id over `[A-Za-z0-9_.:@=+/-]` is accepted unchanged."""
    model, name, base = place
    TRIED["good-id"] += 1
    parsed = model.model_validate_json(id_payload(model, name, base, value))
    held = getattr(parsed, name)
    assert held == ([value] if isinstance(held, list) else value)


@quick(200)
@given(place=st.sampled_from(ENTRY_ID_PLACES + ID_PLACES), value=bad_ids)
def test_an_entry_id_outside_the_id_alphabet_is_refused_too(place: tuple[type[BaseModel], str, dict[str, Any]],
                                                            value: str) -> None:
    """Whatever refuses an id refuses an entry id."""
    model, name, base = place
    TRIED["bad-entry-id"] += 1
    with pytest.raises(ValidationError) as info:
        model.model_validate_json(id_payload(model, name, base, value))
    check_refusal(model, info.value)


@quick(200)
@given(place=st.sampled_from(ENTRY_ID_PLACES), value=ids.filter(lambda v: not is_uuid(v)))
def test_an_entry_id_that_is_no_uuid_is_refused(place: tuple[type[BaseModel], str, dict[str, Any]],
                                                value: str) -> None:
    """An id of the alphabet that no entry can have is `invalid_request`, never a store error."""
    model, name, base = place
    TRIED["non-uuid-entry-id"] += 1
    with pytest.raises(ValidationError) as info:
        model.model_validate_json(id_payload(model, name, base, value))
    assert name in {str(part) for err in info.value.errors() for part in err["loc"]}, info.value.errors()
    check_refusal(model, info.value)


@quick(200)
@given(place=st.sampled_from(ENTRY_ID_PLACES), value=st.uuids(),
       spelling=st.sampled_from([str, lambda v: str(v).upper(), lambda v: v.hex, lambda v: f"{{{v}}}"]))
def test_an_entry_id_is_kept_in_its_canonical_form(place: tuple[type[BaseModel], str, dict[str, Any]],
                                                   value: uuid.UUID, spelling: Any) -> None:
    """Every spelling of a UUID that uuid.UUID reads is accepted, as the lowercase hyphenated form stored."""
    model, name, base = place
    TRIED["good-entry-id"] += 1
    parsed = model.model_validate_json(id_payload(model, name, base, spelling(value)))
    held = getattr(parsed, name)
    assert held == ([str(value)] if isinstance(held, list) else str(value))


def is_uuid(value: str) -> bool:
    """Whether uuid.UUID reads `value`."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


bad_tenants = st.one_of(
    with_bad_char(TENANT_CHARS), st.text(TENANT_CHARS, min_size=65, max_size=2_000), st.just(""), st.just("dlq"),
    st.builds(lambda t, s: t + s, tenants,
              st.sampled_from([".recall", ".>", ".*", " ", "\r\n", "\n", "\t", "\x00"])),
    st.sampled_from(["*", ">", "*.recall", "a.*", "a..b", ".", "\u0430cme", "dlq\n"]),  # Cyrillic а
)


@quick(500)
@given(tenant=bad_tenants)
def test_a_tenant_id_with_a_dot_wildcard_whitespace_or_too_long_is_refused(tenant: str) -> None:
    """From the subject (validate_tenant, check_tenant) or in a payload (tenant_id), a bad tenant id is refused, and
    only ever with InvalidRequest or ValidationError."""
    TRIED["bad-tenant"] += 1
    with pytest.raises(InvalidRequest, match=r"does not match|reserved"):
        validate_tenant(tenant)
    with pytest.raises(InvalidRequest):
        check_tenant(Flush(conversation_id="c1"), tenant)
    with pytest.raises(ValidationError):
        Flush.model_validate({"conversation_id": "c1", "tenant_id": tenant})
    # A handler takes the tenant from the subject: a hostile token never parses into some other valid tenant.
    seen, kind = subjects.parse(subjects.recall("mem", tenant))
    assert seen in (tenant, "unknown")
    if seen == tenant:
        assert kind == "recall"


@quick(200)
@given(tenant=tenants, other=tenants)
def test_a_valid_tenant_passes_and_a_payload_naming_another_is_forbidden(tenant: str, other: str) -> None:
    """`[A-Za-z0-9_-]{1,64}` (but `dlq`) is a tenant; a payload naming another tenant than the subject's is
    Forbidden."""
    TRIED["good-tenant"] += 1
    assert validate_tenant(tenant) == tenant
    assert subjects.parse(subjects.forget("mem", tenant)) == (tenant, "forget")
    check_tenant(Flush(conversation_id="c1", tenant_id=tenant), tenant)
    if other != tenant:
        with pytest.raises(Forbidden):
            check_tenant(Flush(conversation_id="c1", tenant_id=other), tenant)


@quick(400)
@given(subject=st.one_of(st.text(), hostile_strings(10_000),
                         st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.text(), st.text(), st.text())))
def test_parsing_any_subject_never_raises(subject: str) -> None:
    """subjects.parse gives (tenant, kind) for a three-token subject and ("unknown", "") for anything else."""
    TRIED["subject"] += 1
    tenant, kind = subjects.parse(subject)
    parts = subject.split(".")
    if len(parts) == 3 and parts[1]:
        assert (tenant, kind) == (parts[1], parts[2])
    else:
        assert (tenant, kind) == ("unknown", "")


def make_exception(kind: str, message: str) -> BaseException:
    """An exception of `kind` carrying a hostile message."""
    if kind == "json":
        return json.JSONDecodeError(message, message, len(message) // 2)
    if kind == "unicode":
        return UnicodeDecodeError("utf-8", encode(message)[:64] or b"\xff", 0, 1, message)
    known: dict[str, type[BaseException]] = {
        "value": ValueError, "key": KeyError, "runtime": RuntimeError, "recursion": RecursionError,
        "overflow": OverflowError, "invalid": InvalidRequest, "forbidden": Forbidden, "not_found": NotFound,
        "unavailable": Unavailable, "timeout": Timeout, "engram": EngramError}
    return known[kind](message)


@quick(300)
@given(kind=st.sampled_from(["json", "unicode", "value", "key", "runtime", "recursion", "overflow", "invalid",
                             "forbidden", "not_found", "unavailable", "timeout", "engram"]),
       message=hostile_strings(100_000))
def test_any_exception_becomes_a_known_code_and_a_bounded_message(kind: str, message: str) -> None:
    """error_body never raises, keeps the message within 1,000 characters, and says nothing of an internal error's
    details (they are logged, not sent)."""
    TRIED["error-body"] += 1
    exc = make_exception(kind, message)
    body = error_body(exc)
    assert len(body.message) <= MAX_MESSAGE
    if isinstance(exc, EngramError):
        assert body.code == exc.code
    elif kind in ("json", "unicode"):
        assert body.code == "invalid_request"
    else:
        assert body.code == "internal"
        assert body.message == f"internal error ({type(exc).__name__}); the service logged the details"


# Regressions: bugs these properties catch, fixed in 9db9cbb. ------------------------------------------------------

@quick(50)
@example(body=b"[" * 100_000)
@given(body=st.one_of(nested_texts().map(encode), st.binary(max_size=512)))
def test_forget_matchers_never_raise_on_any_stream_body(body: bytes) -> None:
    """Forget reads every queued turn and dead letter of the tenant: a body that is not a turn names nobody (a body
    nested ~1,000 deep raised RecursionError, so every forget of that tenant answered `internal`)."""
    TRIED["forget-matcher"] += 1
    for match in (about(Forget(user_id="u1")), about(Forget(conversation_id="c1")), turns_among({("c1", "t1")})):
        assert match(body) in (True, False)


@pytest.mark.parametrize("tenant", ["acme\n", "a\n", "x" * 64 + "\n", "dlq\n"])
def test_a_tenant_with_a_trailing_newline_is_refused(tenant: str) -> None:
    """A tenant id is exactly `[A-Za-z0-9_-]{1,64}`: no trailing newline (`re.match` with `$` let one through, and
    `dlq\\n` past the reserved check)."""
    with pytest.raises(InvalidRequest, match="does not match"):
        validate_tenant(tenant)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_metadata_numbers_that_are_not_json_are_refused(number: str) -> None:
    """NaN and Infinity are not JSON: refused (they were accepted and stored as null)."""
    with pytest.raises(ValidationError, match="metadata"):
        Turn.model_validate_json(dumps(TURN)[:-1] + ', "metadata": {"score": ' + number + "}}")
