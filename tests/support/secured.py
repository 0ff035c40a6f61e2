"""A deployment as deploy/ ships it, on loopback: deploy/nats/nats.conf on a real nats-server, with TLS from
`engram certs` and the accounts `engram tenants` renders for generated tenants, and engram's settings to serve it."""
import signal
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

from nats.aio.client import Client

from engram_client import MemoryClient
from engram_client.security import NatsSecurity
from shared.messaging import nats_server
from shared.messaging.nats_server import EmbeddedNats
from shared.settings import Settings
from shared.tenancy.folder import TenantsFolder
from shared.tenancy.quotas import Quota, QuotaChanges
from shared.tenancy.reload import RELOADS
from shared.tls.certificates import make

CONF = Path(__file__).parents[2] / "deploy" / "nats" / "nats.conf"
CONTAINER_TLS = "/etc/nats/tls/"  # where deploy/nats/nats.conf expects the certificates
RELOADED = "Reloaded server configuration"  # what nats-server logs after a reload


@dataclass
class Deployment:
    """A running nats-server with deploy/'s configuration, its tenants folder and its certificate authority."""

    server: EmbeddedNats
    folder: TenantsFolder
    tls_dir: Path
    default: Quota
    config: Path
    tenants: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The client URL (TLS, as the server requires)."""
        return f"tls://{self.server.host}:{self.server.port}"

    def tls(self) -> ssl.SSLContext:
        """A client TLS context trusting the deployment's authority."""
        return ssl.create_default_context(cafile=str(self.tls_dir / "ca.pem"))

    def security(self, tenant: str) -> NatsSecurity:
        """How tenant's product connects: its own NKey user, over TLS."""
        return NatsSecurity(nkey_seed_file=str(self.folder.tenant_seed(tenant)), tls=self.tls())

    def engram_security(self) -> NatsSecurity:
        """How engram's services connect."""
        return NatsSecurity(nkey_seed_file=str(self.folder.engram_seed), tls=self.tls())

    def system_security(self) -> NatsSecurity:
        """The system account's user."""
        return NatsSecurity(nkey_seed_file=str(self.folder.system_seed), tls=self.tls())

    def settings(self, data_dir: Path, **changes: object) -> Settings:
        """engram's settings to serve this deployment (fast sweeps for tests), with `changes` on top."""
        fields: dict[str, object] = {
            "data_dir": data_dir, "nats_url": self.url, "http_port": 0, "sweep_interval_s": 0.2, "seal_grace_s": 1.0,
            "idle_timeout_s": 2.0, "nats_nkey_seed_file": self.folder.engram_seed,
            "nats_tls_ca_file": self.tls_dir / "ca.pem", "tenants_file": self.folder.registry_file}
        return Settings.model_validate({**fields, **changes})

    async def client(self, tenant: str, **options: object) -> MemoryClient:
        """tenant's product's client."""
        return await MemoryClient.connect(self.url, tenant, security=self.security(tenant),
                                          **options)  # type: ignore[arg-type]

    def add(self, tenant: str, **quota: object) -> None:
        """Register a tenant (as `engram tenants add` does); the server reads it at the next `reload`."""
        self.folder.add(tenant, QuotaChanges.model_validate(quota), self.default)
        self.tenants.append(tenant)

    def reload(self) -> None:
        """Make the server read its configuration again, twice over, as `engram tenants` does (see
        shared/tenancy/reload.py), with SIGHUP as `nats-server --signal reload` sends it."""
        for _ in range(RELOADS):
            done = self.log().count(RELOADED)
            self.server.process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while self.log().count(RELOADED) <= done:
                assert time.monotonic() < deadline, "the server did not reload within 10 s"
                time.sleep(0.02)

    def log(self) -> str:
        """What the server logged so far."""
        return (self.server.store_dir / "nats-server.log").read_text(errors="replace")

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


@dataclass
class Raw:
    """A raw nats-py connection, with the errors the server reported to it (permission violations among them)."""

    nc: Client
    errors: list[str] = field(default_factory=list)

    def saw(self, text: str) -> bool:
        """Whether an error the server reported contains `text` (case-insensitive)."""
        return any(text.lower() in e.lower() for e in self.errors)

    async def subscribed(self) -> None:
        """Return once the server holds every subscription made so far (two flushes: nats-py 2.16 may send its
        PING ahead of a SUB still in the write buffer)."""
        await self.nc.flush()
        await self.nc.flush()


async def raw(deployment: Deployment, security: NatsSecurity, name: str = "raw",
              allow_reconnect: bool = False) -> Raw:
    """Connect with nats-py as `security` says, recording what the server reports."""
    holder = Raw(nc=Client())

    async def on_error(exc: Exception) -> None:
        holder.errors.append(f"{type(exc).__name__}: {exc}")

    await holder.nc.connect(deployment.url, name=name, error_cb=on_error, allow_reconnect=allow_reconnect,
                            connect_timeout=10, **security.client_options())
    return holder


def deploy(folder: Path, tenants: list[str], default: Quota | None = None) -> Deployment:
    """Start deploy/nats/nats.conf on loopback with TLS and the tenants given (each a NATS account of its own)."""
    folder.mkdir(parents=True, exist_ok=True)
    tls_dir = folder / "tls"
    make(tls_dir)
    tenants_folder = TenantsFolder(folder / "tenants")
    quota = default or Quota()
    tenants_folder.init("mem", quota)
    for tenant in tenants:
        tenants_folder.add(tenant, QuotaChanges(), quota)
    text = CONF.read_text()
    assert text.count(CONTAINER_TLS) == 2 and 'include "accounts/accounts.conf"' in text, \
        "deploy/nats/nats.conf changed shape; update the rendering here"
    # The file as shipped, but for where the certificates are; the accounts are included from the folder beside it.
    config = tenants_folder.root / "nats.conf"
    config.write_text(text.replace(CONTAINER_TLS, f"{tls_dir}/"))
    server = nats_server.start(folder / "jetstream", config=config, monitor_port=0)
    return Deployment(server=server, folder=tenants_folder, tls_dir=tls_dir, default=quota, config=config,
                      tenants=list(tenants))
