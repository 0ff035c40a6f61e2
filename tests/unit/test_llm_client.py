"""The LLM client's parts alone: parsing what a model returns, the circuit breaker, the per-tenant token ledger."""
import asyncio

import pytest

from shared.errors import LlmUnavailable
from shared.llm import parse
from shared.llm.breaker import Breaker, TenantBreakers
from shared.llm.budget import TokenLedger
from shared.llm.schemas import CompressedWindow, SameFactGroups, Summary
from shared.llm.slots import TenantSlots


def test_bare_fenced_and_chatty_json_all_parse() -> None:
    """A model's JSON answer parses whether it is bare, fenced among chatter, or embedded in a sentence."""
    assert parse('{"summary": "Ana moved."}', Summary).summary == "Ana moved."
    assert parse('Sure!\n```json\n{"summary": "Ana moved."}\n```\nAnything else?', Summary).summary == "Ana moved."
    assert parse('Here you go: {"summary": "Ana moved."} Hope it helps', Summary).summary == "Ana moved."


@pytest.mark.parametrize(("content", "says"), [
    ('{"statements": [{"text": "Ana', "not valid JSON"),
    ("I cannot help with that.", "no JSON object"),
    ('["a", "b"]', "not an object"),
    ('{"items": []}', "does not match the schema"),
    ('{"statements": [{"text": "Ana moved.", "source_turn_ids": []}]}', "source_turn_ids"),
])
def test_invalid_answers_say_what_is_wrong(content: str, says: str) -> None:
    """Truncated JSON, no JSON, a non-object, a schema mismatch and a field failing its constraint are each refused with
    a message saying which."""
    with pytest.raises(ValueError, match=says):
        parse(content, CompressedWindow)


def test_unknown_fields_are_ignored_and_types_checked() -> None:
    """Unknown fields in an answer are ignored, while a known field of the wrong type is refused, naming the field."""
    answer = parse('{"groups": [["a", "b"]], "confidence": 0.9}', SameFactGroups)
    assert answer.groups == [["a", "b"]]
    with pytest.raises(ValueError, match="groups"):
        parse('{"groups": "a,b"}', SameFactGroups)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_after_consecutive_failures_and_half_opens_after_the_cooldown() -> None:
    """The breaker opens only after consecutive failures (a success resets the count) and refuses calls for the
    cooldown; then it lets exactly one trial through, whose failure reopens it and whose success closes it."""
    clock = Clock()
    breaker = Breaker(failures=3, cooldown_s=30, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.failed()
    breaker.succeeded()  # a success in between resets the count
    for _ in range(3):
        assert breaker.allow()
        breaker.failed()
    assert breaker.state == "open" and not breaker.allow()
    clock.now += 29
    assert not breaker.allow()
    clock.now += 2
    assert breaker.state == "half_open"
    assert breaker.allow()          # one trial call
    assert not breaker.allow()      # and only one
    breaker.failed()                # the trial failed: open again for a whole cooldown
    assert breaker.state == "open"
    clock.now += 31
    assert breaker.allow()
    breaker.succeeded()
    assert breaker.state == "closed" and breaker.allow()


def test_the_ledger_refuses_a_tenant_past_its_hour_and_resets_on_the_next() -> None:
    """The ledger refuses a tenant whose tokens this hour exceed its budget, leaves other tenants alone, and starts the
    next hour at zero while keeping the per-purpose totals."""
    clock = Clock()
    ledger = TokenLedger(per_hour=1000, clock=clock)
    ledger.spend("a", "compress", 600)
    ledger.check("a")
    ledger.spend("a", "facts", 500)
    with pytest.raises(LlmUnavailable) as refused:
        ledger.check("a")
    assert refused.value.reason == "over_budget"
    ledger.check("b")  # another tenant's budget is its own
    clock.now += 3600
    ledger.check("a")
    assert ledger.by_purpose("a") == {"compress": 600, "facts": 500}
    assert ledger.spent("a") == 0


def test_no_budget_means_no_limit() -> None:
    """Without a per-hour budget, no amount of spending makes the ledger refuse a tenant."""
    ledger = TokenLedger(per_hour=None, clock=Clock())
    for purpose in ("plan", "compress", "facts"):
        ledger.spend("a", purpose, 10**9)
        ledger.check("a")  # with a budget, the first 10**9 tokens would already be refused
    assert ledger.spent("a") == 3 * 10**9  # spent past any budget within one hour, counted and never refused
    assert ledger.by_purpose("a") == {"plan": 10**9, "compress": 10**9, "facts": 10**9}


def test_one_tenants_slow_calls_open_its_own_breaker_not_the_endpoints() -> None:
    """A tenant whose calls keep timing out while another's answer goes offline alone; timeouts of two tenants in a
    row open the endpoint's breaker for everyone, as do failures that speak of the endpoint (429, 5xx), whoever
    calls."""
    clock = Clock()
    breakers = TenantBreakers(failures=3, cooldown_s=30, clock=clock)
    for _ in range(3):
        assert breakers.allow("slow") == (True, "")
        breakers.failed("slow", timed_out=True)
        assert breakers.allow("calm") == (True, "")
    assert breakers.allow("slow") == (False, "tenant") and breakers.allow("calm") == (True, "")
    assert breakers.endpoint.state == "closed"
    breakers.succeeded("calm")
    for tenant in ("a", "b", "a"):  # the endpoint is slow for everyone: timeouts of two tenants in a row
        assert breakers.allow(tenant)[0]
        breakers.failed(tenant, timed_out=True)
    assert breakers.endpoint.state == "open" and breakers.allow("calm") == (False, "endpoint")
    down = TenantBreakers(failures=2, cooldown_s=30, clock=clock)
    for _ in range(2):
        assert down.allow("only")[0]
        down.failed("only")  # a 5xx or a 429: the endpoint's failure, whichever tenant met it
    assert down.endpoint.state == "open"


async def test_one_tenant_holds_at_most_its_share_of_the_slots() -> None:
    """With 4 slots and a share of 2, a tenant's third call waits while another tenant's call gets a slot at once."""
    slots = TenantSlots(total=4, share=2)
    async with slots.hold("flood"), slots.hold("flood"):
        third = asyncio.create_task(_hold_briefly(slots, "flood"))
        await asyncio.sleep(0)
        assert not third.done() and slots.in_use("flood") == 2
        async with asyncio.timeout(1):
            async with slots.hold("calm"):
                assert slots.in_use("calm") == 1
    async with asyncio.timeout(1):
        await third
    assert slots.in_use("flood") == 0


async def _hold_briefly(slots: TenantSlots, tenant: str) -> None:
    async with slots.hold(tenant):
        pass
