"""The NATS accounts configuration of a deployment, rendered from the tenants registry.

One account per tenant, holding its product's user: a product reaches engram only through what engram's account
exports to its account alone (its seven request and JetStream subjects as services, its events and dead letters as
streams), so any reply subject it names lies in its own account, and nothing it publishes can touch engram's streams,
buckets or another tenant. engram's services live in the ENGRAM account with JetStream; the products' accounts have
none. The account limits (connections, subscriptions, payload) are NATS's to enforce. Config accounts rather than
operator-mode JWTs: one file rendered from the registry, hot-reloaded by the server, no resolver to run and no signing
keys to guard (docs/operations/security.md).
"""
import json
from typing import Any

from engram_client import subjects
from shared.tenancy.quotas import Quota
from shared.tenancy.registry import Registry

ENGRAM_ACCOUNT, SYSTEM_ACCOUNT = "ENGRAM", "SYS"
# A product may export its own tenant's memory (a person's copy of their data), never import into it: an import
# writes entries as they are, with the ids, times and scores the file gives, past the ingestors' compression and
# rates, so it is an operator's (`mem.<tenant>.import` is served, and exported to no tenant's account).
REQUEST_KINDS = ("recall", "entries", "forget", "consolidate", "export")

# What engram's services publish and subscribe: consume the turns streams, read and write the working-memory and
# consolidation buckets, manage streams and consumers ($JS.API), ack ($JS.ACK), answer flow control ($JS.FC),
# publish events and dead letters (mem.>), serve the request subjects and operator requests (_ENGRAM.>), receive
# their own replies (_INBOX.>), and answer each request once on the reply subject it named (allow_responses).
_ENGRAM_PERMISSIONS: dict[str, Any] = {
    "publish": {"allow": ["{prefix}.>", "_ENGRAM.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>"]},
    "subscribe": {"allow": ["{prefix}.>", "_ENGRAM.>", "_INBOX.>"]},
    "allow_responses": {"max": 1, "expires": "2h"},
}


def account_of(tenant: str) -> str:
    """The NATS account of a tenant's product."""
    return f"TENANT_{tenant}"


def _services(prefix: str, tenant: str) -> list[str]:
    return [subjects.turns(prefix, tenant), subjects.flush(prefix, tenant),
            *(f"{prefix}.{tenant}.{kind}" for kind in REQUEST_KINDS)]


def _streams(prefix: str, tenant: str) -> list[str]:
    return [subjects.events(prefix, tenant), subjects.dlq(prefix, tenant)]


def _engram_permissions(prefix: str) -> dict[str, Any]:
    return json.loads(json.dumps(_ENGRAM_PERMISSIONS).replace("{prefix}", prefix))  # type: ignore[no-any-return]


def _tenant_account(prefix: str, tenant: str, nkey: str, quota: Quota) -> dict[str, Any]:
    permissions = {
        "publish": {"allow": _services(prefix, tenant)},
        # Its own inboxes (an older product may still use the `_INBOX_<tenant>` prefix), events and dead letters.
        "subscribe": {"allow": ["_INBOX.>", f"_INBOX_{tenant}.>", *_streams(prefix, tenant)]},
    }
    return {
        "users": [{"nkey": nkey, "permissions": permissions}],
        "limits": {"max_connections": quota.max_connections, "max_subscriptions": quota.max_subscriptions,
                   "max_payload": quota.max_payload_bytes},
        "imports": [*({"service": {"account": ENGRAM_ACCOUNT, "subject": s}} for s in _services(prefix, tenant)),
                    *({"stream": {"account": ENGRAM_ACCOUNT, "subject": s}} for s in _streams(prefix, tenant))],
    }


def render(registry: Registry, default: Quota) -> str:
    """The accounts configuration (`accounts.conf`, included by deploy/nats/nats.conf) for the registry."""
    prefix = registry.prefix
    exports: list[dict[str, Any]] = []
    accounts: dict[str, Any] = {}
    for tenant, entry in sorted(registry.tenants.items()):
        account = account_of(tenant)
        exports += [{"service": s, "accounts": [account]} for s in _services(prefix, tenant)]
        exports += [{"stream": s, "accounts": [account]} for s in _streams(prefix, tenant)]
        accounts[account] = _tenant_account(prefix, tenant, entry.nkey, default.overridden(entry.quota))
    engram = {"jetstream": "enabled", "exports": exports,
              "users": [{"nkey": registry.engram_nkey, "permissions": _engram_permissions(prefix)}]}
    everything = {ENGRAM_ACCOUNT: engram, **accounts,
                  SYSTEM_ACCOUNT: {"users": [{"nkey": registry.system_nkey}]}}
    return ("# Rendered by `engram tenants` from tenants.json: edit with the command, not by hand.\n"
            f"accounts: {json.dumps(everything, indent=2)}\n"
            f"system_account: {json.dumps(SYSTEM_ACCOUNT)}\n")
