"""A deployment as deploy/ ships it, on loopback: deploy/nats/nats.conf on a real nats-server, with TLS from
`engram certs` and the accounts `engram tenants` renders for generated tenants, and engram's settings to serve it."""
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from engram_client import MemoryClient
from engram_client.security import NatsSecurity
from shared.messaging import nats_server
from shared.messaging.nats_server import EmbeddedNats
from shared.settings import Settings
from shared.tenancy.folder import TenantsFolder
from shared.tenancy.quotas import Quota, QuotaChanges
from shared.tls.certificates import make

CONF = Path(__file__).parents[2] / "deploy" / "nats" / "nats.conf"
CONTAINER_TLS = "/etc/nats/tls/"  # where deploy/nats/nats.conf expects the certificates


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
        return Settings(data_dir=data_dir, nats_url=self.url, http_port=0, sweep_interval_s=0.2, seal_grace_s=1.0,
                        idle_timeout_s=2.0, nats_nkey_seed_file=self.folder.engram_seed,
                        nats_tls_ca_file=self.tls_dir / "ca.pem", tenants_file=self.folder.registry_file,
                        **changes)  # type: ignore[arg-type]

    async def client(self, tenant: str, **options: object) -> MemoryClient:
        """tenant's product's client."""
        return await MemoryClient.connect(self.url, tenant, security=self.security(tenant),
                                          **options)  # type: ignore[arg-type]

    def add(self, tenant: str, **quota: object) -> None:
        """Register a tenant (as `engram tenants add` does); the server reads it at the next `reload`."""
        self.folder.add(tenant, QuotaChanges.model_validate(quota), self.default)
        self.tenants.append(tenant)

    def reload(self) -> None:
        """Make the server read its configuration again (a SIGHUP, as `nats-server --signal reload` sends)."""
        import signal

        self.server.process.send_signal(signal.SIGHUP)

    def log(self) -> str:
        """What the server logged so far."""
        return (self.server.store_dir / "nats-server.log").read_text(errors="replace")

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


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
    assert text.count(CONTAINER_TLS) == 2 and 'include "accounts.conf"' in text, \
        "deploy/nats/nats.conf changed shape; update the rendering here"
    # The file as shipped, but for where the certificates are; accounts.conf is included from beside it.
    config = tenants_folder.root / "nats.conf"
    config.write_text(text.replace(CONTAINER_TLS, f"{tls_dir}/"))
    server = nats_server.start(folder / "jetstream", config=config, monitor_port=0)
    return Deployment(server=server, folder=tenants_folder, tls_dir=tls_dir, default=quota, config=config,
                      tenants=list(tenants))
