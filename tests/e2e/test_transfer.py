"""Export and import through the client SDK against a running stack: one user's export holds nothing of another's, a
file of another tenant is refused unless mapped (and, mapped, lands once however often it is imported), and a hostile
file or request gets a clear error and writes nothing of another tenant."""
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from engram_client import Forbidden, InvalidRequest, MemoryClient
from engram_client.contract import ExportedEntry, ExportHeader, ImportRequest
from engram_client.portable import check_file
from services.stack import Running
from shared.store import Scope
from tests.support.ids import unique
from tests.support.memory import store_all
from tests.support.polling import eventually
from tests.support.transfer import export_file, holding_stack, lines_of, payloads
from tests.support.turns import conversation

ANA_WORDS = ["Zorblax", "Quillfen", "Brimlocket"]  # said by Ana only: her diary, her open turn, her talk turn
BO_WORDS = ["Marrowvane", "Tesselite", "Vexhollow"]  # said by Bo only


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    """A stack whose unflushed turns stay in working memory, and that consolidates only when asked."""
    async with holding_stack(tmp_path_factory.mktemp("transfer")) as state:
        yield state


async def connect(stack: Running, tenant: str) -> MemoryClient:
    """A client of the stack for one tenant."""
    return await MemoryClient.connect(stack.nats_url, tenant, timeout_s=30)


async def holding(stack: Running, tenant: str, conversation_id: str, turns: int) -> None:
    """Wait until working memory holds that many open turns of the conversation."""
    wm = stack.consolidator_deps[0].places.working_memory
    await eventually(lambda: wm.get(tenant, conversation_id), lambda b: b is not None and len(b.open) == turns)


async def test_the_export_of_one_user_holds_nothing_of_another(stack: Running, tmp_path: Path) -> None:
    """Ana and Bo each keep a diary (stored as entries), talk together in a conversation that is stored (its episode
    holds both their words) and in one still in working memory. Ana's export holds her diary's entries, her own turn
    of the stored talk in place of its entries, and her open turn: every word of hers and no entry, turn or word of
    Bo's; Bo's export likewise; the tenant's export holds every entry and turn."""
    tenant = unique("users")
    async with await connect(stack, tenant) as client:
        talk = [*conversation([("Ana", f"I will bake {ANA_WORDS[2]} bread for the picnic on Sunday.")], "talk",
                              user_id="ana"),
                *conversation([("Bo", f"Then I will bring {BO_WORDS[2]} cider and the blanket.")], "talk",
                              user_id="bo")]
        talk[1] = talk[1].model_copy(update={"turn_id": "talk-bo", "ts": talk[0].ts + timedelta(minutes=1)})
        await store_all(client, [
            *conversation([("Ana", f"My cat {ANA_WORDS[0]} sleeps on the piano all day.")], "ana-diary", user_id="ana"),
            *conversation([("Bo", f"I painted my boat {BO_WORDS[0]} green yesterday.")], "bo-diary", user_id="bo"),
            *talk])
        shared = [*conversation([("Ana", f"Shall we meet at {ANA_WORDS[1]} tomorrow?")], "shared", user_id="ana"),
                  *conversation([("Bo", f"Only if {BO_WORDS[1]} is open by then.")], "shared", user_id="bo")]
        shared[1] = shared[1].model_copy(update={"turn_id": "shared-bo"})
        await client.publish_turns(shared)
        await holding(stack, tenant, "shared", 2)
        talk_entries = (await client.entries(conversation_id="talk")).entries
        assert talk_entries and any(set(e.speaker_ids) == {"ana", "bo"} for e in await stack.store.get(
            Scope(tenant_id=tenant), [e.id for e in talk_entries]))

        for me, mine, theirs, diary, turn_ids in [
                ("ana", ANA_WORDS, BO_WORDS, "ana-diary", ["shared-0", "talk-0"]),
                ("bo", BO_WORDS, ANA_WORDS, "bo-diary", ["shared-bo", "talk-bo"])]:
            path = await export_file(client, tmp_path / f"{me}.jsonl", user_id=me)
            header, entries, turns = lines_of(path)
            text = path.read_text(encoding="utf-8")
            assert (header.tenant_id, header.user_id) == (tenant, me)
            assert entries and {e.user_id for e in entries} == {me} and {e.conversation_id for e in entries} == {diary}
            assert sorted((t.turn_id, t.user_id) for t in turns) == [(t, me) for t in turn_ids]
            assert all(word in text for word in mine), f"{me}'s own words are missing from their export"
            assert not any(word in text for word in theirs), f"another's words are in {me}'s export"
            other = "bo" if me == "ana" else "ana"
            assert f'"{other}"' not in text and f"{other}-diary" not in text
            assert check_file(path, tenant).entries == len(entries)

        _, every_entry, every_turn = lines_of(await export_file(client, tmp_path / "all.jsonl"))
        assert {e.user_id for e in every_entry} == {"ana", "bo"}
        assert {e.id for e in talk_entries} <= {e.id for e in every_entry}
        assert sorted(t.turn_id for t in every_turn) == ["shared-0", "shared-bo"]
        assert all(word in (tmp_path / "all.jsonl").read_text(encoding="utf-8") for word in ANA_WORDS + BO_WORDS)


async def test_a_file_of_another_tenant_is_refused_unless_mapped_and_lands_once(stack: Running,
                                                                                tmp_path: Path) -> None:
    """A's export (entries and working-memory turns) is refused by tenant B, on the client and by engram; mapped,
    it is refused while A's entries hold its ids in this deployment, and nothing of it lands in B. Once A's user is
    forgotten, the mapped import files every entry under B with its id and payload, and the turns in B's working
    memory; a second import writes nothing and changes no payload."""
    source, target = unique("source"), unique("target")
    store, wm = stack.store, stack.consolidator_deps[0].places.working_memory
    async with await connect(stack, source) as a, await connect(stack, target) as b:
        await store_all(a, conversation([("Ana", "I adopted a grey parrot called Pixel in March."),
                                         ("Ana", "Pixel already says my name every morning.")], "pets", user_id="u1"))
        await a.publish_turns(conversation([("Ana", "Remind me to buy seeds for Pixel on Friday.")], "open",
                                           user_id="u1"))
        await holding(stack, source, "open", 1)
        path = await export_file(a, tmp_path / "a.jsonl")
        header, entries, turns = lines_of(path)
        before = await payloads(store, source)
        assert len(entries) == len(before) >= 1 and [t.turn_id for t in turns] == ["open-0"]

        with pytest.raises(Forbidden, match="--map-tenant"):
            await b.import_from(path)
        with pytest.raises(Forbidden, match="map_tenant"):  # engram checks it too, whatever the client does
            await b.import_batch(ImportRequest(source=header, entries=entries))
        with pytest.raises(Forbidden, match="are another tenant's in this deployment"):
            await b.import_from(path, map_tenant=True)
        assert await payloads(store, target) == {} and await wm.conversations(target) == []
        assert await payloads(store, source) == before

        assert (await a.forget(user_id="u1")).verified
        first = await b.import_from(path, map_tenant=True)
        assert (first.entries_written, first.entries_present, first.turns_queued) == (len(entries), 0, 1)
        assert await payloads(store, target) == before  # the same ids, every field as it was
        await holding(stack, target, "open", 1)

        again = await b.import_from(path, map_tenant=True)
        assert (again.entries_written, again.entries_present, again.turns_queued, again.turns_present) == (
            0, len(entries), 0, 1)
        assert await payloads(store, target) == before
        await holding(stack, target, "open", 1)
        recalled = await b.recall("What should I buy for Pixel?", conversation_id="open", include_working_memory=True)
        assert [t.turn_id for t in recalled.working_memory] == ["open-0"]


async def test_a_hostile_import_gets_a_clear_error_and_writes_nothing_of_another_tenant(
        stack: Running, tmp_path: Path) -> None:
    """Into tenant X: a file whose entry names the victim tenant, a malformed line, or an oversized text is refused
    naming the line; requests sent past the client's checks (an entry naming the victim, an entry holding one of the
    victim's ids, an oversized text, `internal` fields standing in for the tenant) are refused with a clear code. The
    victim's entries are the same afterwards and X holds nothing."""
    victim, intruder = unique("victim"), unique("intruder")
    store = stack.store
    async with await connect(stack, victim) as v, await connect(stack, intruder) as x:
        await store_all(v, conversation([("Vera", "My locker code is 4417 and nobody else knows it.")], "vault",
                                        user_id="vera"))
        before = await payloads(store, victim)
        _, victim_entries, _ = lines_of(await export_file(v, tmp_path / "victim.jsonl"))
        mine = ExportHeader(type="header", tenant_id=intruder, exported_at=victim_entries[0].created_at)
        entry = json.loads(victim_entries[0].model_dump_json(exclude_none=True))  # one of the victim's ids
        fresh = {**entry, "id": "9a1f4a4e-3c52-5a1e-9d2b-0c5e6f7a8b9c"}

        def file(*lines: str) -> Path:
            path = tmp_path / f"{unique('hostile')}.jsonl"
            path.write_text("".join(f"{line}\n" for line in (mine.model_dump_json(), *lines)), encoding="utf-8")
            return path

        for lines, error, needle in [
                ([json.dumps({**fresh, "tenant_id": victim})], Forbidden, f":2: entry {fresh['id']} names tenant"),
                ([json.dumps(fresh), '{"type": "entry", "id": '], InvalidRequest, ":3: not a line of an engram export"),
                ([json.dumps({**fresh, "text": "x" * 200_001})], InvalidRequest, ":2: not a line of an engram export"),
        ]:
            with pytest.raises(error, match=needle):
                await x.import_from(file(*lines))

        raw = {"schema_version": 1, "source": json.loads(mine.model_dump_json())}
        for body, code, needle in [
                ({**raw, "entries": [{**fresh, "tenant_id": victim}]}, "forbidden", "names tenant"),
                ({**raw, "entries": [entry]}, "forbidden", "another tenant's in this deployment"),
                ({**raw, "entries": [{**fresh, "text": "x" * 200_001}]}, "invalid_request", "at most 200,000"),
                ({**raw, "entries": [{**fresh, "internal": {"tenant_id": victim}}]}, "invalid_request",
                 "name none of the entry's own fields"),
                ({**raw, "tenant_id": victim, "entries": [fresh]}, "forbidden", "payload tenant"),
        ]:
            reply = await x.raw_request("import", json.dumps(body).encode())
            assert reply["error"]["code"] == code and needle in reply["error"]["message"], reply

        assert await payloads(store, victim) == before
        assert await payloads(store, intruder) == {}
        assert isinstance(ExportedEntry.model_validate(fresh), ExportedEntry)  # the refusals were not the line's own


async def test_a_file_exported_before_a_forget_brings_nobody_back(stack: Running, tmp_path: Path) -> None:
    """A tenant's export holds Ana's and Bo's entries and Ana's turn still in working memory; Ana is forgotten, then
    the file is imported back: her entries and her turn are left out and counted (the forget mark says she was
    forgotten here), Bo's are found already there, and the tenant holds nothing of hers afterwards."""
    tenant = unique("back")
    async with await connect(stack, tenant) as client:
        await store_all(client, [
            *conversation([("Ana", f"My cat {ANA_WORDS[0]} sleeps on the piano all day.")], "ana-diary", user_id="ana"),
            *conversation([("Bo", f"I painted my boat {BO_WORDS[0]} green yesterday.")], "bo-diary", user_id="bo")])
        await client.publish_turns(conversation([("Ana", f"Shall we meet at {ANA_WORDS[1]} tomorrow?")], "open",
                                                user_id="ana"))
        await holding(stack, tenant, "open", 1)
        path = await export_file(client, tmp_path / "before.jsonl")
        _, entries, turns = lines_of(path)
        hers = [e for e in entries if e.user_id == "ana"]
        assert hers and len(turns) == 1

        assert (await client.forget(user_id="ana")).verified
        kept = await payloads(stack.store, tenant)
        result = await client.import_from(path)
        assert (result.entries_written, result.entries_forgotten, result.turns_queued, result.turns_forgotten) == (
            0, len(hers), 0, 1), result
        assert result.entries_present == len(entries) - len(hers)
        assert await payloads(stack.store, tenant) == kept
        assert not any(word in json.dumps(kept) for word in ANA_WORDS)
