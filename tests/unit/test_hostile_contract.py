"""Hostile input against every contract model, with hypothesis (no broker).

Whatever bytes arrive (random or adversarial JSON, invalid UTF-8, control characters, deep nesting, payloads past
NATS's max_payload), a request model either parses them or refuses them with a pydantic ValidationError whose wire
error is `invalid_request` with a short message; ids and tenant ids with a character outside their alphabet or
too many characters are refused; subjects parse without raising, and a hostile tenant token never parses into
another valid tenant.

The strategies are in tests/support/hostile.py: tests/e2e/test_hostile_input.py sends the same payloads to a running
stack. Each property counts the inputs it ran (TRIED); `pytest -s` prints the total when the module ends. Properties
for the The last tests pin the bugs these properties caught that 9db9cbb fixed.
"""
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from pydantic import BaseModel, ValidationError

from engram_client import subjects
from engram_client.contract import (
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
from tests.support.hostile import (
    ID_CHARS,
    MAX_MESSAGE,
    TENANT_CHARS,
    dumps,
    encode,
    hostile_payloads,
    hostile_strings,
    ids,
    json_values,
    nested_texts,
    quick,
    sized,
    tenants,
)

REQUEST_MODELS: tuple[type[BaseModel], ...] = (RecallRequest, RecallFilters, Turn, Flush, Forget, EntriesRequest,
                                               ConsolidateRequest, RebuildRequest)
KINDS = ("turns", "flush", "recall", "entries", "forget", "consolidate")
TRIED: Counter[str] = Counter()   # inputs run per property


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
