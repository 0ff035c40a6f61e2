"""Answering Forget and Consolidate requests under the tenant's lease (the consolidator's handlers call these)."""
from collections.abc import Awaitable, Callable

from engram_client.contract import ConsolidateRequest, ConsolidationSummary, Forget, ForgetResult, check_tenant
from engram_client.errors import Unavailable
from shared.consolidation.forget import Places, forget
from shared.consolidation.lease import Leases
from shared.consolidation.run import Consolidation
from shared.consolidation.schedule import measured
from shared.runtime import metrics

Announce = Callable[[str, Forget], Awaitable[None]]  # tell whoever must also apply a forget (a running rebuild)


async def forget_then_rescan(places: Places, leases: Leases, tenant: str, request: Forget) -> ForgetResult:
    """Forget, then make the tenant's next scheduled run a full one: what was deleted left no change for a run to
    find its owner by. The caller holds the tenant's lease."""
    result = await forget(places, tenant, request)
    await leases.full_next(tenant)
    return result


async def forget_leased(places: Places, leases: Leases, tenant: str, request: Forget, *, wait_s: float,
                        announce: Announce) -> ForgetResult:
    """Answer a Forget request: forget under the tenant's lease, count what went where, and announce it.

    Raises:
        Unavailable: a consolidation of the tenant held the lease for over `wait_s`.
    """
    check_tenant(request, tenant)
    # Under the tenant's lease: a consolidation running meanwhile could write back a profile built from facts this
    # request deletes.
    result = await leases.run(tenant, lambda: forget_then_rescan(places, leases, tenant, request), wait_s=wait_s)
    if result is None:
        raise Unavailable(f"a consolidation of tenant {tenant!r} has held its lease for over {wait_s:g} s; ask "
                          f"again later")
    for place, count in result.deleted.model_dump().items():
        metrics.forgotten_total.labels(place).inc(count)
    await announce(tenant, request)  # a rebuild running anywhere applies it to the new build too
    return result


async def consolidate_leased(consolidation: Consolidation, leases: Leases, tenant: str, request: ConsolidateRequest,
                             *, wait_s: float) -> ConsolidationSummary:
    """Answer a Consolidate request: run the tenant's jobs now, under its lease, counted as a requested run.

    Raises:
        Unavailable: another replica has been consolidating the tenant for over `wait_s`.
    """
    check_tenant(request, tenant)
    summary = await leases.run(tenant, lambda: measured(consolidation, tenant, request, "request"), wait_s=wait_s)
    if summary is None:
        raise Unavailable(f"another replica has been consolidating tenant {tenant!r} for over {wait_s:g} s; ask "
                          f"again later")
    return summary
