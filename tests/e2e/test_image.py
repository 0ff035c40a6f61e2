"""The Docker image, built from the real Dockerfile with no registry and no network, run as production runs it."""
import contextlib
import subprocess

import pytest

from tests.support import image
from tests.support.polling import eventually

HEALTH_WAIT_S = 300  # the HEALTHCHECK's start period (60 s) and three failed checks fit well inside
SERVED_WAIT_S = 60  # engram's services read a changed registry within seconds; each probe is a `docker exec`
LATE_TENANT = "late"  # added on the host while the container runs
# A client of the container's NATS, run inside it with nats-py (argv: a CA file or "", a seed file or ""): it connects
# over TLS, once, and prints what it met.
CONNECT = """
import asyncio, ssl, sys
import nats

async def main(ca: str, seed: str) -> None:
    options = {"tls": ssl.create_default_context(cafile=ca)} if ca else {}
    if seed:
        options["nkeys_seed"] = seed
    nc = await nats.connect("tls://127.0.0.1:4222", allow_reconnect=False, connect_timeout=5, **options)
    print("connected", nc.connected_server_version)
    await nc.close()

asyncio.run(main(*sys.argv[1:]))
"""


def _docker(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s)


def _health() -> str:
    """The container's state and, while it runs, the verdict of the image's own HEALTHCHECK."""
    found = _docker("inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", image.CONTAINER)
    assert found.returncode == 0, found.stderr
    return found.stdout.strip()


async def _wait_for_health() -> str:
    """Poll until the health check settles (healthy or unhealthy) or the container stops; the state then, or
    still "running starting" after HEALTH_WAIT_S."""
    with contextlib.suppress(AssertionError):  # the test fails on the state, with the container's log
        # polling docker inspect once a second; the HEALTHCHECK's interval sets the pace
        return await eventually(_health, lambda state: state != "running starting", timeout_s=HEALTH_WAIT_S,
                                interval_s=1)
    return _health()


@pytest.mark.timeout(1800)  # run alone on a new machine, the wait for the build (debootstrap included) is here
async def test_the_image_runs_engram_with_tls_and_accounts_read_only_healthy_and_answering_the_demo(
        image_build: image.Background) -> None:
    """The image built from the real Dockerfile (Debian base by debootstrap, wheels from the host, no network in the
    build) runs `engram up` as its numeric non-root user, on a read-only root filesystem with only a tmpfs at /data
    and no network, its embedded nats-server on deploy/nats/nats.conf with the certificates of `engram certs` and the
    accounts of `engram tenants` mounted read-only: its own HEALTHCHECK turns healthy; `engram demo` run inside the
    container as the demo tenant (its NKey seed, the CA) is answered by that running engram (it does not fall back to
    a stack of its own); a client that does not trust the CA fails the certificate check, and one that trusts it but
    has no credentials is refused; a tenant added on the host while the container runs is refused until `engram
    tenants reload` (run inside), then connects and is served (the accounts and the registry are mounted as folders,
    so the running container sees their new files); then the container stops cleanly."""
    state = await _wait_for_health()
    if state != "running healthy":
        logs = _docker("logs", "--tail", "60", image.CONTAINER)
        pytest.fail(f"container {state!r}; its log:\n{logs.stdout}{logs.stderr}")

    settings = _docker("inspect", "--format", "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} "
                       "{{.HostConfig.NetworkMode}}", image.CONTAINER)
    assert settings.stdout.split() == [image.UID, "true", "none"]
    identity = _docker("exec", image.CONTAINER, "id", "-u")
    assert identity.stdout.strip() == image.UID.split(":")[0]
    written = _docker("exec", image.CONTAINER, "touch", "/opt/engram/written")
    assert written.returncode != 0 and "Read-only file system" in written.stderr

    mounted = _docker("exec", image.CONTAINER, "touch", f"{image.IN_CONTAINER_TLS}/written")
    assert mounted.returncode != 0 and "Read-only file system" in mounted.stderr

    demo = _docker("exec", "--env", f"ENGRAM_NATS_NKEY_SEED_FILE={image.DEMO_SEED}",
                   "--env", f"ENGRAM_NATS_TLS_CA_FILE={image.CA}", image.CONTAINER, "engram", "demo",
                   "--tenant", image.DEMO_TENANT, timeout_s=300)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "no engram answers" not in demo.stdout, demo.stdout[-3000:]
    assert "Lisbon" in demo.stdout and "recall round trip" in demo.stdout, demo.stdout[-3000:]

    # The same client code, as the check that it can pass: the demo tenant's seed and the CA connect.
    trusted = _docker("exec", image.CONTAINER, "python", "-c", CONNECT, image.CA, image.DEMO_SEED)
    assert trusted.returncode == 0 and "connected" in trusted.stdout, trusted.stdout + trusted.stderr
    untrusted = _docker("exec", image.CONTAINER, "python", "-c", CONNECT, "", image.DEMO_SEED)
    assert untrusted.returncode != 0, untrusted.stdout
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr[-3000:]
    anonymous = _docker("exec", image.CONTAINER, "python", "-c", CONNECT, image.CA, "")
    assert anonymous.returncode != 0, anonymous.stdout
    assert "authorization violation" in anonymous.stderr.lower(), anonymous.stderr[-3000:]

    # The accounts and the registry are replaced by new files renamed over the old: the container sees them because
    # their folders are mounted. NATS reads the new accounts only when reloaded, engram the registry on its own.
    late_seed = image.add_tenant(LATE_TENANT, image_build.log)
    unknown = _docker("exec", image.CONTAINER, "python", "-c", CONNECT, image.CA, late_seed)
    assert unknown.returncode != 0, unknown.stdout
    assert "authorization violation" in unknown.stderr.lower(), unknown.stderr[-3000:]
    reloaded = _docker("exec", image.CONTAINER, "engram", "tenants", "reload", "--dir", image.IN_CONTAINER_TENANTS,
                       "--nats-url", "tls://127.0.0.1:4222")
    assert reloaded.returncode == 0, reloaded.stdout[-3000:] + reloaded.stderr[-3000:]
    known = _docker("exec", image.CONTAINER, "python", "-c", CONNECT, image.CA, late_seed)
    assert known.returncode == 0 and "connected" in known.stdout, known.stdout + known.stderr
    served = await eventually(
        lambda: _docker("exec", "--env", f"ENGRAM_NATS_NKEY_SEED_FILE={late_seed}", image.CONTAINER, "engram",
                        "entries", "--tenant", LATE_TENANT, "--nats-url", "tls://127.0.0.1:4222", "--json"),
        lambda result: result.returncode == 0, timeout_s=SERVED_WAIT_S, interval_s=1)
    assert '"entries": []' in served.stdout, served.stdout[-3000:]

    stopped = _docker("stop", "--time", "30", image.CONTAINER)
    assert stopped.returncode == 0, stopped.stderr
    exit_code = _docker("inspect", "--format", "{{.State.ExitCode}}", image.CONTAINER).stdout.strip()
    assert exit_code == "0", _docker("logs", "--tail", "50", image.CONTAINER).stderr
