"""Tenants come and go while engram runs: `engram tenants add|rotate|remove` change the accounts and reload every
server without a restart; a tenant the registry does not list is served nothing."""
import json
import os
import subprocess
import sys

import pytest

from engram_client import wait_until_stored
from engram_client.errors import Forbidden
from engram_client.security import NatsSecurity
from services.stack import Running
from shared.messaging import streams
from shared.tenancy.quotas import QuotaChanges
from shared.tenancy.reload import reload_servers
from tests.support.attack import Tenants
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.secured import Deployment, raw
from tests.support.turns import conversation


def _engram(deployment: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the `engram` CLI as an operator would, against the deployment (its CA trusted)."""
    env = {**os.environ, "ENGRAM_NATS_TLS_CA_FILE": str(deployment.tls_dir / "ca.pem"), "ENGRAM_LOG_LEVEL": "WARNING"}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


async def test_a_tenant_added_while_engram_runs_is_served_after_the_reload(deployment: Deployment,
                                                                          stack: Running) -> None:
    """`engram tenants add T --nats-url URL` registers the tenant, reloads the server through the system account and
    makes its turns stream: its product connects with its new seed, its turns are stored and recalled. (The reload
    happens twice over: a single reload leaves a new account's imports without a responder in nats-server 2.15.)"""
    tenant = unique("newcomer")
    added = _engram(deployment, "tenants", "add", tenant, "--dir", str(deployment.folder.root), "--nats-url",
                    deployment.url)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "reloaded" in added.stdout and "turns stream" in added.stdout
    turns = conversation([("Ana", "My new bike is a green Brompton.")], conversation_id="n1")
    async with await deployment.client(tenant) as client:
        await client.publish_turns(turns)
        await client.flush("n1")
        await wait_until_stored(client, turns, timeout_s=60)
        found = await eventually(lambda: client.recall("What bike do I have?"),
                                 lambda r: r.error is None and bool(r.entries), timeout_s=30)
        assert "Brompton" in found.entries[0].text


async def test_a_rotated_tenant_connects_with_its_new_seed_only_and_a_removed_one_not_at_all(
        deployment: Deployment, stack: Running, tenants: Tenants) -> None:
    """Rotating gives the tenant a new NKey user (the old seed is refused after the reload); removing takes the
    account away (its product can no longer connect), and `engram tenants list` no longer names it. (What the
    commands run, called directly: the CLI itself is the test above.)"""
    tenant = unique("rotating")
    deployment.folder.add(tenant, QuotaChanges(), deployment.default)
    await reload_servers(deployment.url, deployment.folder.system_seed, deployment.tls())
    old_copy = deployment.folder.root / f"{tenant}.old.nk"
    old_copy.write_bytes(deployment.folder.tenant_seed(tenant).read_bytes())
    old_copy.chmod(0o600)
    old = NatsSecurity(nkey_seed_file=str(old_copy), tls=deployment.tls())
    deployment.folder.rotate(tenant, deployment.default)
    await reload_servers(deployment.url, deployment.folder.system_seed, deployment.tls())
    with pytest.raises(Exception, match=r"(?i)authorization|no servers"):
        await raw(deployment, old, "old-seed")
    fresh = await raw(deployment, deployment.security(tenant), "new-seed")
    await fresh.nc.close()
    deployment.folder.remove(tenant, deployment.default)
    await reload_servers(deployment.url, deployment.folder.system_seed, deployment.tls())
    assert not deployment.folder.tenant_seed(tenant).exists()
    with pytest.raises(Exception, match=r"(?i)authorization|no servers"):
        await raw(deployment, old, "removed")
    listed = _engram(deployment, "tenants", "list", "--dir", str(deployment.folder.root))
    assert tenant not in listed.stdout and tenants.victim in listed.stdout


async def test_a_tenant_the_registry_does_not_list_is_served_nothing(deployment: Deployment,
                                                                     stack: Running) -> None:
    """Even from inside engram's own account, where subjects of any tenant can be published: a turn of a tenant the
    registry does not list is refused by the provisioner (no stream is made) and its requests are `forbidden`."""
    stranger = unique("stranger")
    insider = await raw(deployment, deployment.engram_security(), "insider")
    try:
        answer = json.loads((await insider.nc.request(f"mem.{stranger}.turns", b"{}", timeout=10)).data)
        assert answer["error"]["code"] == 403 and "not registered" in answer["error"]["description"]
        assert stranger not in await streams.tenant_streams(insider.nc, "mem")
        reply = json.loads((await insider.nc.request(f"mem.{stranger}.recall", b'{"query": "x"}', timeout=10)).data)
        assert reply["error"]["code"] == Forbidden.code
    finally:
        await insider.nc.close()
