"""`engram tenants`: register the products engram serves, each in a NATS account of its own (shared/tenancy).

init makes a deployment's tenants folder; add, set, rotate and remove change it, render the NATS accounts and, given
a NATS URL, reload every server of the cluster without a restart (through the system account) and make a new
tenant's turns stream at once; list shows the tenants and their quotas.
"""
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from engram_client import connection
from engram_client.contract import validate_tenant
from engram_client.security import NatsSecurity
from services.cli.base import console, err, load_settings, run
from shared.messaging import streams
from shared.messaging.connection import server_info
from shared.messaging.security import tls_context
from shared.settings import Settings
from shared.tenancy.folder import TenantsFolder
from shared.tenancy.quotas import Quota, QuotaChanges
from shared.tenancy.reload import reload_servers

app = typer.Typer(help="Register the products engram serves, each in a NATS account of its own.",
                  no_args_is_help=True)

DirOpt = Annotated[Path | None, typer.Option("--dir", help="the tenants folder (default: the one holding "
                                                           "ENGRAM_TENANTS_FILE, else ./secrets/tenants)")]
UrlOpt = Annotated[str | None, typer.Option("--nats-url", help="reload the servers there (default: ENGRAM_NATS_URL; "
                                                               "none: print how to reload)")]
Int = Annotated[int | None, typer.Option(min=1)]
Rate = Annotated[float | None, typer.Option(min=0.001)]


def _folder(settings: Settings, given: Path | None) -> TenantsFolder:
    if given is not None:
        return TenantsFolder(given)
    if settings.tenants_file is not None:  # <folder>/registry/tenants.json
        return TenantsFolder(settings.tenants_file.parent.parent)
    return TenantsFolder(Path("secrets") / "tenants")


def _changes(max_connections: int | None, max_subscriptions: int | None, max_payload_bytes: int | None,
             turns_max_bytes: int | None, recall_per_s: float | None, requests_per_s: float | None,
             ingest_per_s: float | None) -> QuotaChanges:
    return QuotaChanges(max_connections=max_connections, max_subscriptions=max_subscriptions,
                        max_payload_bytes=max_payload_bytes, turns_max_bytes=turns_max_bytes,
                        recall_per_s=recall_per_s, requests_per_s=requests_per_s, ingest_per_s=ingest_per_s)


async def _apply(settings: Settings, folder: TenantsFolder, url: str | None, tenant: str | None = None) -> None:
    """Reload every server at `url` and make the tenant's turns stream there (engram's user, as an ingestor would on
    its first message); without a URL, say how to reload."""
    if not url:
        console.print(f"[yellow]no NATS URL: reload the servers yourself[/yellow] (`engram tenants reload --dir "
                      f"{folder.root} --nats-url URL`, or `nats-server --signal reload`)")
        return
    tls = tls_context(settings.nats_tls_ca_file)
    names = await reload_servers(url, folder.system_seed, tls)
    console.print(f"reloaded {', '.join(names)}")
    if tenant is None:
        return
    nc = await connection.connect(url, "engram-tenants", quiet=True, security=NatsSecurity(
        nkey_seed_file=str(folder.engram_seed), tls=tls, tls_handshake_first=settings.nats_tls_handshake_first))
    try:
        quota = Quota.from_settings(settings).overridden(folder.load().tenants[tenant].quota)
        replicas = streams.replicas(server_info(nc), settings.nats_replicas)
        await streams.ensure_tenant(nc.jetstream(), folder.load().prefix, tenant, streams.TurnsLimits(
            max_bytes=quota.turns_max_bytes, max_message_bytes=quota.max_payload_bytes), settings.turn_retention_s,
            replicas)
    finally:
        await connection.close(nc)
    console.print(f"made tenant {tenant}'s turns stream")


@app.command()
def init(directory: DirOpt = None) -> None:
    """Make a tenants folder: the registry, engram's own and the system account's NATS users, and the accounts."""
    settings = load_settings()
    folder = _folder(settings, directory)
    folder.init(settings.subject_prefix, Quota.from_settings(settings))
    console.print(f"made {folder.root}: give engram's services ENGRAM_NATS_NKEY_SEED_FILE={folder.engram_seed} and "
                  f"ENGRAM_TENANTS_FILE={folder.registry_file} (mount its folder); mount {folder.accounts_file.parent} "
                  "as the folder accounts/ beside nats.conf")


@app.command()
def add(tenant: Annotated[str, typer.Argument(help="the tenant id ([A-Za-z0-9_-]{1,64})")],
        directory: DirOpt = None, nats: UrlOpt = None, max_connections: Int = None, max_subscriptions: Int = None,
        max_payload_bytes: Int = None, turns_max_bytes: Int = None, recall_per_s: Rate = None,
        requests_per_s: Rate = None, ingest_per_s: Rate = None) -> None:
    """Register a tenant: a NATS account and user of its own (quota options override the defaults)."""
    settings = load_settings()
    validate_tenant(tenant)
    folder = _folder(settings, directory)
    seed = folder.add(tenant, _changes(max_connections, max_subscriptions, max_payload_bytes, turns_max_bytes,
                                       recall_per_s, requests_per_s, ingest_per_s), Quota.from_settings(settings))
    console.print(f"registered tenant {tenant}; hand its product the NKey seed {seed} (it connects with "
                  f"NatsSecurity(nkey_seed_file=...), or ENGRAM_NATS_NKEY_SEED_FILE for the engram CLI)")
    run(_apply(settings, folder, nats or settings.nats_url, tenant))


@app.command(name="set")
def set_quota(tenant: str, directory: DirOpt = None, nats: UrlOpt = None, max_connections: Int = None,
              max_subscriptions: Int = None, max_payload_bytes: Int = None, turns_max_bytes: Int = None,
              recall_per_s: Rate = None, requests_per_s: Rate = None, ingest_per_s: Rate = None) -> None:
    """Change a tenant's quota (the options given); NATS applies it at the reload, engram within seconds."""
    settings = load_settings()
    folder = _folder(settings, directory)
    quota = folder.set_quota(tenant, _changes(max_connections, max_subscriptions, max_payload_bytes, turns_max_bytes,
                                              recall_per_s, requests_per_s, ingest_per_s),
                             Quota.from_settings(settings))
    console.print(f"tenant {tenant}'s quota: {quota.model_dump()}")
    run(_apply(settings, folder, nats or settings.nats_url))


@app.command()
def rotate(tenant: str, directory: DirOpt = None, nats: UrlOpt = None) -> None:
    """Give a tenant a new NATS user; the old seed is refused from the servers' reload on."""
    settings = load_settings()
    folder = _folder(settings, directory)
    seed = folder.rotate(tenant, Quota.from_settings(settings))
    console.print(f"tenant {tenant}'s new NKey seed: {seed}")
    run(_apply(settings, folder, nats or settings.nats_url))


@app.command()
def remove(tenant: str, directory: DirOpt = None, nats: UrlOpt = None) -> None:
    """Unregister a tenant: its product can no longer connect. What engram holds of it stays until forgotten."""
    settings = load_settings()
    folder = _folder(settings, directory)
    folder.remove(tenant, Quota.from_settings(settings))
    err.print(f"removed tenant {tenant}; its memory stays in engram (forget or export it first if it must go)")
    run(_apply(settings, folder, nats or settings.nats_url))


@app.command(name="list")
def list_tenants(directory: DirOpt = None) -> None:
    """The registered tenants and where their quotas depart from the defaults."""
    settings = load_settings()
    folder = _folder(settings, directory)
    registry = folder.load()
    table = Table("tenant", "added", "quota (departures from the defaults)")
    for tenant, entry in sorted(registry.tenants.items()):
        table.add_row(tenant, entry.added_at.date().isoformat(),
                      ", ".join(f"{k}={v}" for k, v in entry.quota.model_dump(exclude_none=True).items()) or "-")
    console.print(table)


@app.command(name="reload")
def reload_command(directory: DirOpt = None, nats: UrlOpt = None) -> None:
    """Ask every NATS server of the cluster to read its configuration again."""
    settings = load_settings()
    run(_apply(settings, _folder(settings, directory), nats or settings.nats_url))
