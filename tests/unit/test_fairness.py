"""The per-tenant share of a retriever's workers: counted while held, refused at once over it, released always."""
import pytest
from prometheus_client import REGISTRY

from engram_client.errors import Unavailable
from shared.retrieval.fairness import TenantShares, tenant_limit


@pytest.mark.parametrize(("workers", "share", "limit"), [(16, 0.5, 8), (16, 1.0, 16), (16, 0.25, 4), (10, 0.3, 3),
                                                         (1, 0.5, 1), (3, 0.1, 1), (15, 0.5, 7)])
def test_the_limit_is_the_share_of_the_workers_and_at_least_one(workers: int, share: float, limit: int) -> None:
    assert tenant_limit(workers, share) == limit


def test_a_tenant_over_its_share_is_refused_with_a_retryable_error_naming_the_limit() -> None:
    shares = TenantShares("recall", workers=4, share=0.5)
    with shares.hold("loud"), shares.hold("loud"):
        with pytest.raises(Unavailable) as refusal, shares.hold("loud"):
            pytest.fail("a third request of the tenant was let in")
        assert shares.held("loud") == 2
    assert refusal.value.retryable
    message = str(refusal.value)
    assert "'loud'" in message and "ENGRAM_RECALL_TENANT_SHARE=0.5" in message and "retry" in message


def test_another_tenant_is_let_in_while_one_is_at_its_share() -> None:
    shares = TenantShares("recall", workers=4, share=0.5)
    with shares.hold("loud"), shares.hold("loud"), shares.hold("calm"), shares.hold("calm"):
        assert (shares.held("loud"), shares.held("calm")) == (2, 2)


def test_a_slot_is_given_back_when_the_request_ends_even_by_an_error() -> None:
    shares = TenantShares("entries", workers=2, share=0.5)
    with pytest.raises(RuntimeError), shares.hold("t"):
        raise RuntimeError("the handler failed")
    assert shares.held("t") == 0
    with shares.hold("t"):  # the slot is free again
        assert shares.held("t") == 1


def refused(kind: str) -> float:
    """engram_tenant_limited_total{kind} now."""
    return REGISTRY.get_sample_value("engram_tenant_limited_total", {"kind": kind}) or 0.0


def test_a_refusal_holds_nothing_and_is_counted_by_kind() -> None:
    shares = TenantShares("entries", workers=1, share=1.0)
    before = refused("entries")
    with shares.hold("t"):
        for _ in range(3):
            with pytest.raises(Unavailable), shares.hold("t"):
                pass
        assert shares.held("t") == 1
    assert shares.held("t") == 0
    assert refused("entries") == before + 3


def test_only_tenants_in_flight_are_kept() -> None:
    shares = TenantShares("recall", workers=16, share=0.5)
    for i in range(1000):
        with shares.hold(f"tenant-{i}"):
            pass
    assert shares._held == {}


def test_a_share_of_one_lets_a_tenant_hold_every_worker() -> None:
    shares = TenantShares("recall", workers=3, share=1.0)
    with shares.hold("t"), shares.hold("t"), shares.hold("t"), pytest.raises(Unavailable), shares.hold("t"):
        pass
