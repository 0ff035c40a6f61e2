"""The `engram` CLI against a running stack: ingest a JSONL file (waiting until recallable), recall, entries,
consolidate."""
import asyncio
import json
import sys
from pathlib import Path
from typing import get_args

from services.stack import Running
from shared.evaluation import updates
from tests.support.ids import unique
from tests.support.turns import conversation


async def engram(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.cli", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                env={"ENGRAM_LOG_LEVEL": "WARNING", "COLUMNS": "200",
                                                     "PATH": "/usr/bin:/bin"})
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    return proc.returncode or 0, out.decode()


async def test_ingest_recall_and_entries_from_the_command_line(stack: Running, tmp_path: Path) -> None:
    """The CLI ingests a JSONL file and waits until it is recallable, then recalls, lists entries and consolidates it
    as JSON, and rejects an unknown job."""
    tenant = unique("cli")
    turns = conversation([("Ana", "My brother Leo lives in Montreal and teaches chemistry."),
                          ("Bo", "Does he like the winters there?"),
                          ("Ana", "He loves them, he goes cross-country skiing every weekend.")], conversation_id="k1")
    source = tmp_path / "turns.jsonl"
    source.write_text("\n".join(t.model_dump_json() for t in turns) + "\n")
    code, out = await engram("ingest", str(source), "--tenant", tenant, "--nats-url", stack.nats_url, "--wait")
    assert code == 0, out
    assert "published 3 turns in 1 conversations" in out and "all 3 turns recallable" in out
    code, out = await engram("recall", "What does Leo teach?", "--tenant", tenant, "--nats-url", stack.nats_url,
                             "--json", "-k", "1")
    assert code == 0, out
    reply = json.loads(out)
    assert "chemistry" in reply["entries"][0]["text"] and reply["entries"][0]["source_turn_ids"] == ["k1-0", "k1-1",
                                                                                                       "k1-2"]
    code, out = await engram("entries", "--tenant", tenant, "--nats-url", stack.nats_url, "--json")
    assert code == 0
    listed = json.loads(out)["entries"]
    assert [e["kind"] for e in listed].count("episodic") == 1
    assert [(e["attribute"], e["value"]) for e in listed if e["kind"] == "fact"] == [("family:brother:leo", "Leo")]
    code, out = await engram("consolidate", "--tenant", tenant, "--nats-url", stack.nats_url, "--json")
    assert code == 0 and json.loads(out)["profiles_updated"] == 1, out
    code, out = await engram("consolidate", "--tenant", tenant, "--nats-url", stack.nats_url, "--job", "nap")
    assert code == 1 and "nap" in out


async def test_bad_files_and_unreachable_servers_fail_clearly(tmp_path: Path) -> None:
    """The CLI exits 1 naming the file and line of a bad turn, and saying it cannot connect when NATS is unreachable."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"conversation_id": "c"}\n')
    code, out = await engram("ingest", str(bad), "--nats-url", "nats://127.0.0.1:1")
    assert code == 1 and "bad.jsonl:1: not a valid turn" in out
    code, out = await engram("recall", "hello", "--nats-url", "nats://127.0.0.1:1")
    assert code == 1 and "cannot connect to NATS" in out


async def test_an_unknown_half_of_the_update_stories_is_named_with_the_halves_there_are(tmp_path: Path) -> None:
    """`engram eval updates` and `engram eval story` exit 2 on a half that does not exist, listing the ones that do."""
    code, out = await engram("eval", "updates", "--split", "nope", "--out", str(tmp_path))
    halves = ", ".join(get_args(updates.Split))
    assert code == 2 and f"--split must be one of {halves}, not 'nope'" in out
    code, out = await engram("eval", "story", "en-001", str(tmp_path / "story.jsonl"), "--split", "bad")
    assert code == 2 and "not 'bad'" in out and not (tmp_path / "story.jsonl").exists()
