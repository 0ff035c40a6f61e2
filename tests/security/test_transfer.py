"""Export and import across accounts: a product exports its own tenant's memory through engram's account and nothing
of another's, and reaches no tenant's import subject, its own included (an import is an operator's)."""
from pathlib import Path

from engram_client import subjects
from engram_client.contract import ExportRequest
from services.stack import Running
from tests.support.attack import Tenants, VictimMemory
from tests.support.polling import eventually
from tests.support.secured import Deployment, raw
from tests.support.transfer import export_file, lines_of

VICTIM_WORDS = ("Kiwi", "Lisbon", "pottery")  # in the victim's stored entries and open window


async def test_a_product_exports_its_own_tenant_only_and_imports_into_none(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory,
        tmp_path: Path) -> None:
    """The victim's product exports its memory (entries and open turns) through its account; the attacker's export
    holds nothing of the victim's, its export request naming the victim's tenant is refused, and every publish to the
    victim's export subject or to any import subject (the victim's, its own) is a permissions violation."""
    victim, attacker = tenants.victim, tenants.attacker
    wm = stack.consolidator_deps[0].places.working_memory
    await eventually(lambda: wm.get(victim, "v-open"), lambda b: b is not None and len(b.open) == 2)
    async with await deployment.client(victim) as client:
        _, entries, turns = lines_of(await export_file(client, tmp_path / "victim.jsonl"))
    assert entries and {t.turn_id for t in turns} == {t.turn_id for t in victim_memory.open_window}
    assert all(word in (tmp_path / "victim.jsonl").read_text(encoding="utf-8") for word in VICTIM_WORDS)

    async with await deployment.client(attacker) as client:
        _, entries, turns = lines_of(await export_file(client, tmp_path / "attacker.jsonl"))
        assert (entries, turns) == ([], [])
        forged = await client.raw_request("export", ExportRequest(tenant_id=victim).model_dump_json().encode())
        assert forged["error"]["code"] == "forbidden", forged
    assert not any(word in (tmp_path / "attacker.jsonl").read_text(encoding="utf-8") for word in VICTIM_WORDS)

    hostile = await raw(deployment, deployment.security(attacker), "attacker")
    try:
        for subject in (subjects.export("mem", victim), subjects.import_("mem", victim),
                        subjects.import_("mem", attacker)):
            await hostile.nc.publish(subject, b"{}")
            await eventually(lambda: hostile.errors, lambda errors, s=subject: any(
                f'permissions violation for publish to "{s}"'.lower() in e.lower() for e in errors), timeout_s=5)
    finally:
        await hostile.nc.close()
