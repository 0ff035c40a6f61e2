"""`engram console`: serve the web console (services/console) on loopback, or elsewhere over TLS behind a token.

Operators sign in with the console token (ENGRAM_CONSOLE_TOKEN or --token-file; on loopback one is made and printed
when none is given); tenants with their product's NKey seed, checked against the tenants registry
(ENGRAM_TENANTS_FILE). Any address but loopback needs both a configured token and TLS (--tls-cert, --tls-key).
"""
import secrets
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from pydantic import SecretStr

from engram_client import connection
from engram_client.contract import validate_tenant
from engram_client.security import NatsSecurity
from services.cli.base import NatsOpt, TenantOpt, console, err, load_settings, nats_url, run
from services.console.app import LOOPBACK_HOSTS, build, console_for
from services.console.signin import SignIn
from services.tokens import MAKE_ONE, configured_token, is_loopback
from shared.errors import ConfigError
from shared.messaging.security import nats_security, tls_context
from shared.settings import Settings


def guarded(settings: Settings, token_file: Path | None, host: str, tls_cert: Path | None,
            tls_key: Path | None) -> tuple[SecretStr | None, bool]:
    """The configured operator token (None: make one) and whether TLS is on; refuses a bind other machines reach
    without both a token and TLS, and half a TLS configuration.

    Raises:
        ConfigError: what is missing, and how to give it.
    """
    token = configured_token(settings.console_token, token_file, "ENGRAM_CONSOLE_TOKEN", "the console token")
    if (tls_cert is None) != (tls_key is None):
        raise ConfigError("give both --tls-cert and --tls-key (the console's certificate and its key), or neither")
    tls = tls_cert is not None
    if not is_loopback(host) and (token is None or not tls):
        missing = " and ".join(m for m, ok in (("TLS (--tls-cert, --tls-key)", tls),
                                               ("a token (ENGRAM_CONSOLE_TOKEN or --token-file)", token)) if not ok)
        raise ConfigError(f"refusing to serve the console on --host {host!r} without {missing}: whoever reaches it "
                          f"could read and erase every tenant's memory. {MAKE_ONE}; `engram certs` makes a "
                          "certificate. Or listen on 127.0.0.1 (the default)")
    return token, tls


async def serve_console(settings: Settings, url: str, token: SecretStr, host: str, port: int,
                        tls_cert: Path | None, tls_key: Path | None, default_tenant: str) -> None:
    """Connect to NATS with engram's own identity (the operator's sessions), then serve until a signal stops it."""
    operator_nc = await connection.connect(url, "engram-console", security=nats_security(settings))
    tenant_base = NatsSecurity(tls=tls_context(settings.nats_tls_ca_file),
                               tls_handshake_first=settings.nats_tls_handshake_first)
    signin = SignIn(token, settings.tenants_file, tenant_base)
    app = build(console_for(signin, operator_nc, url, settings.subject_prefix, secure_cookies=tls_cert is not None,
                            default_tenant=default_tenant,
                            allowed_hosts=LOOPBACK_HOSTS if is_loopback(host) else None))
    config = uvicorn.Config(app, host=host, port=port, access_log=False, log_level="warning",
                            ssl_certfile=str(tls_cert) if tls_cert else None,
                            ssl_keyfile=str(tls_key) if tls_key else None, lifespan="on")
    server = uvicorn.Server(config)
    try:
        await server.serve()
    finally:
        await connection.close(operator_nc)


def console_command(
        host: Annotated[str, typer.Option("--host", help="address to listen on (not loopback: TLS and a token are "
                                                         "required)")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="port")] = 8780,
        token_file: Annotated[Path | None, typer.Option(
            "--token-file", help="a file holding the operator's sign-in token (or ENGRAM_CONSOLE_TOKEN)")] = None,
        tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="the console's TLS certificate (PEM)")] = None,
        tls_key: Annotated[Path | None, typer.Option("--tls-key", help="its private key (PEM)")] = None,
        tenant: TenantOpt = "default", nats: NatsOpt = None) -> None:
    """Serve the engram console: a person's memory along time, recall with its reasons, erase and export, live
    events. Operators sign in with the console token; tenants with their product's NKey seed."""
    settings = load_settings()
    try:
        token, tls = guarded(settings, token_file, host, tls_cert, tls_key)
        validate_tenant(tenant)
    except (ConfigError, ValueError) as exc:
        err.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc
    scheme = "https" if tls else "http"
    console.print(f"engram console on {scheme}://{host}:{port}/ (NATS {nats_url(settings, nats)})")
    if token is None:
        token = SecretStr(secrets.token_urlsafe(24))
        console.print(f"operator sign-in token for this run: {token.get_secret_value()}")
    if settings.tenants_file is not None:
        console.print(f"tenants sign in with their product's NKey seed (registry {settings.tenants_file})")
    run(serve_console(settings, nats_url(settings, nats), token, host, port, tls_cert, tls_key, tenant))
