"""A consolidation lease whose holder's process is gone is taken over at once by a process on the same host (real
nats-server, real processes killed with SIGKILL); a live holder's, and one this process cannot see, waits out its TTL
as before."""
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.js.kv import KeyValue

from shared.consolidation import process as processes
from shared.consolidation.lease import Leases
from shared.consolidation.process import Process
from shared.messaging import nats_server, streams
from shared.runtime import metrics
from tests.support.ids import unique

TTL_S = 60.0  # as engram ships it: nothing in a test expires by itself
ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import asyncio, sys
import nats
from shared.consolidation import process as processes
from shared.consolidation.lease import Leases

async def main(url: str, prefix: str, tenant: str) -> None:
    nc = await nats.connect(url)
    leases = await Leases.open(nc.jetstream(), prefix, "another engram", float(sys.argv[4]))
    print(await leases.acquire(tenant), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(*sys.argv[1:4]))
"""


@dataclass
class Bucket:
    """Our leases, the bucket they are kept in, and how to start another process holding one."""

    url: str
    prefix: str
    ours: Leases
    kv: KeyValue

    def holder(self, tenant: str) -> subprocess.Popen[str]:
        """Another process that took the tenant's lease (and holds it until killed)."""
        child = subprocess.Popen([sys.executable, "-c", HOLDER, self.url, self.prefix, tenant, str(TTL_S)],
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                 env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}"})
        assert child.stdout is not None
        revision = child.stdout.readline().strip()
        assert revision.isdigit(), f"the holder did not take the lease: {revision!r}"
        return child


@pytest.fixture
async def bucket(tmp_path: Path) -> AsyncIterator[Bucket]:
    server = nats_server.start(tmp_path / "nats")
    nc = await nats.connect(server.url)
    prefix = unique("p")
    try:
        js = nc.jetstream()
        ours = await Leases.open(js, prefix, "this engram", TTL_S)
        yield Bucket(server.url, prefix, ours, await js.key_value(streams.consolidation_buckets(prefix)[0]))
    finally:
        await nc.close()
        server.stop()


def reap(child: subprocess.Popen[str]) -> None:
    child.wait()
    if child.stdout is not None:
        child.stdout.close()


def taken_over() -> float:
    return float(metrics.lease_changes_total.labels("taken_over")._value.get())


async def test_a_killed_holder_s_lease_is_taken_at_once_and_a_live_one_s_never(bucket: Bucket) -> None:
    """While another process holds a tenant's lease, this one cannot take it; once that process is killed (and
    reaped), it takes it at once, not a TTL later, and says so in the lease metric."""
    tenant = unique("t")
    child = bucket.holder(tenant)
    try:
        assert await bucket.ours.acquire(tenant) is None
        assert await bucket.ours.acquire(tenant) is None  # asked again: still theirs
    finally:
        child.send_signal(signal.SIGKILL)
        reap(child)
    before = taken_over()
    revision = await bucket.ours.acquire(tenant)
    assert revision is not None
    value = json.loads((await bucket.kv.get(tenant)).value or b"")
    assert value["holder"] == "this engram" and value["process"]["pid"] == os.getpid()
    assert taken_over() == before + 1
    assert await bucket.ours.acquire(tenant) is None  # now ours: held, not taken from ourselves


async def test_a_holder_killed_and_not_yet_reaped_is_gone(bucket: Bucket) -> None:
    """A holder killed but not reaped by its parent (a zombie: its id still answers) is gone too."""
    tenant = unique("t")
    child = bucket.holder(tenant)
    child.send_signal(signal.SIGKILL)
    try:
        for _ in range(100):
            if Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.05)
        else:
            pytest.fail("the killed holder never became a zombie")
        assert await bucket.ours.acquire(tenant) is not None
    finally:
        reap(child)


async def test_a_holder_this_process_cannot_see_is_waited_out(bucket: Bucket) -> None:
    """A lease naming no process (an engram from before), a process of another host, boot, PID namespace (another
    container) or user whose id no process here has, a process named in another form, or a value that is no lease
    (deeply nested, not JSON) is waited out; one naming a live process's id with another start (the id reused since)
    is gone."""
    me = Process.this()
    assert me is not None
    dead = me.model_copy(update={"pid": 2**22 + 7})  # above pid_max's ceiling (2^22): no process has it
    waited = [None, *(dead.model_copy(update=other).model_dump() for other in (
        {"boot": "another-boot"}, {"namespace": "pid:[1]"}, {"host": "another-host"}, {"uid": me.uid + 1})),
        {"pid": "x"}, "pid 4000000"]
    values = [json.dumps({"holder": "elsewhere", "process": process}).encode() for process in waited]
    unreadable = metrics.state_unreadable_total.labels("leases")._value.get()
    for value in [*values, b"[" * 100_000, b"not json"]:
        tenant = unique("t")
        await bucket.kv.create(tenant, value)
        assert await bucket.ours.acquire(tenant) is None, value[:100]
        assert await bucket.ours.acquire(tenant) is None  # asked again, as a waiting request does
    # The values that are no lease at all were reported as unreadable, once each however often a waiting request
    # asks; a lease naming its process in another form is a lease that names none.
    assert metrics.state_unreadable_total.labels("leases")._value.get() == unreadable + 2
    for process in (dead.model_dump(), me.model_copy(update={"started": me.started - 1}).model_dump()):
        tenant = unique("t")
        await bucket.kv.create(tenant, json.dumps({"holder": "gone", "process": process}).encode())
        assert await bucket.ours.acquire(tenant) is not None, process


async def test_a_lease_renewed_after_it_was_read_is_not_deleted(bucket: Bucket) -> None:
    """The takeover deletes the lease only at the revision it read: a holder that renewed in between keeps it."""
    tenant = unique("t")
    me = Process.this()
    assert me is not None
    gone = json.dumps({"holder": "gone", "process": me.model_copy(update={"pid": 2**22 + 7}).model_dump()}).encode()
    await bucket.kv.create(tenant, gone)
    real_get = bucket.ours._leases.get

    async def renewed_meanwhile(key: str) -> object:
        entry = await real_get(key)
        await bucket.kv.update(key, json.dumps({"holder": "alive", "process": None}).encode(), last=entry.revision)
        return entry

    bucket.ours._leases.get = renewed_meanwhile  # type: ignore[method-assign, assignment]
    assert await bucket.ours.acquire(tenant) is None
    assert json.loads((await bucket.kv.get(tenant)).value or b"")["holder"] == "alive"


def test_a_holder_proc_does_not_answer_for_plainly_is_not_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a process /proc plainly does not have, or has as a zombie or with another start, is gone: one whose
    entry cannot be read (here a folder where its stat should be, as a denied or unreadable entry would be) or does
    not parse is not; a name of any bytes (not UTF-8, with spaces and brackets) is read past."""
    me = Process.this()
    assert me is not None
    monkeypatch.setattr(processes, "PROC", tmp_path)
    fields = " ".join(["S", *["0"] * 18, str(me.started), "0"])
    (tmp_path / "101").mkdir()
    (tmp_path / "101" / "stat").write_bytes(b"101 (bad\xff\xfe) name)) " + fields.encode())
    (tmp_path / "102" / "stat").mkdir(parents=True)  # unreadable as a file
    (tmp_path / "103").mkdir()
    (tmp_path / "103" / "stat").write_bytes(b"103 (short) S 1 2")
    (tmp_path / "104").mkdir()
    (tmp_path / "104" / "stat").write_bytes(b"104 (zombie) Z " + " ".join(["0"] * 18 + [str(me.started), "0"]).encode())

    def holder(pid: int) -> Process:
        return me.model_copy(update={"pid": pid})

    assert not me.sees_gone(holder(101))  # alive, with the start it named
    assert me.sees_gone(holder(101).model_copy(update={"started": me.started + 1}))  # its id reused since
    assert not me.sees_gone(holder(102)) and not me.sees_gone(holder(103))
    assert me.sees_gone(holder(104)) and me.sees_gone(holder(105))  # a zombie; no such process
    assert not me.sees_gone(holder(0)) and not me.sees_gone(holder(-1))


PROC_LINE = "22 27 0:21 / /proc rw,relatime shared:12 - proc proc {}\n"


@pytest.mark.parametrize(("mounts", "names"), [
    (PROC_LINE.format("rw"), True), (PROC_LINE.format("rw,hidepid=0"), True),
    (PROC_LINE.format("rw,hidepid=2"), False), (PROC_LINE.format("rw,hidepid=invisible"), False),
    (PROC_LINE.format("rw,subset=pid"), False),
    (PROC_LINE.format("rw") + PROC_LINE.format("rw,hidepid=2"), False),  # mounted again over the first
    ("25 1 8:1 / / rw - ext4 /dev/root rw\n", False)])  # no /proc found: not known not to hide
def test_no_process_is_named_where_proc_may_hide_live_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mounts: str, names: bool) -> None:
    """A /proc mounted with hidepid (or showing only process entries), even under or over another, may hide a live
    holder even of this user, which would look gone: there this process names none, so it judges no holder gone and
    waits every lease out; so too where no /proc is found."""
    pid = os.getpid()
    me = tmp_path / str(pid)
    (me / "ns").mkdir(parents=True)
    (tmp_path / "self").symlink_to(str(pid))
    (me / "ns" / "pid").symlink_to("pid:[4026531836]")
    (me / "stat").write_bytes(f"{pid} (python) R ".encode() + " ".join(["0"] * 18 + ["42", "0"]).encode())
    (me / "mountinfo").write_text(mounts)
    (tmp_path / "sys" / "kernel" / "random").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "random" / "boot_id").write_text("a-boot\n")
    monkeypatch.setattr(processes, "PROC", tmp_path)
    named = Process.this()
    assert (named is not None) == names
    if named is not None:
        assert (named.boot, named.pid, named.started) == ("a-boot", pid, 42)
