"""Reloading every NATS server's configuration without a restart, through the system account: after `engram tenants`
rewrote the accounts, each server of the cluster is asked to read its files again (`$SYS.REQ.SERVER.<id>.RELOAD`).

Twice: nats-server 2.15 resolves the imports of an account that a reload introduces against the exporting account
as it was before that reload, so a new tenant's requests find no responder until the next reload (its imports show
valid in /accountz all the same). A second reload, which changes nothing, resolves them against the live account.
tests/security/test_tenants.py::test_a_tenant_added_while_engram_runs_is_served_after_the_reload holds it.
"""
import json
import ssl
from pathlib import Path

from nats.errors import TimeoutError as NatsTimeout

from engram_client import connection
from engram_client.errors import Unavailable
from engram_client.security import NatsSecurity

PING = "$SYS.REQ.SERVER.PING"
RELOADS = 2  # see the module doc
GATHER_S = 1.0  # how long the servers' answers to the ping are gathered


async def reload_servers(url: str, system_seed_file: Path, tls: ssl.SSLContext | None = None) -> list[str]:
    """Ask every server reachable at `url` (its whole cluster) to reload its configuration; their names.

    Raises:
        Unavailable: no server answered, or one refused (its reason in the message).
    """
    nc = await connection.connect(url, "engram-tenants", quiet=True, first_connect_timeout_s=5.0,
                                  security=NatsSecurity(nkey_seed_file=str(system_seed_file), tls=tls))
    try:
        inbox = nc.new_inbox()
        answers = await nc.subscribe(inbox)
        await nc.publish(PING, b"", reply=inbox)
        servers: dict[str, str] = {}
        while True:
            try:
                msg = await answers.next_msg(timeout=GATHER_S)
            except (TimeoutError, NatsTimeout):  # every server that will answer has answered
                break
            server = json.loads(msg.data).get("server", {})
            servers[server.get("id", "")] = server.get("name", "?")
        servers.pop("", None)
        if not servers:
            raise Unavailable(f"no NATS server at {url} answered the system account's ping; is the seed the "
                              "system account's?")
        for _ in range(RELOADS):
            for server_id, name in servers.items():
                reply = json.loads((await nc.request(f"$SYS.REQ.SERVER.{server_id}.RELOAD", b"", timeout=10)).data)
                if reply.get("error"):
                    raise Unavailable(f"NATS server {name} refused to reload: {reply['error']}")
        return sorted(servers.values())
    finally:
        await connection.close(nc)
