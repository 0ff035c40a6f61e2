"""The Docker image built with no registry: a Debian bookworm base made by debootstrap, engram's dependencies as
wheels prepared on the host, then the real Dockerfile with `--network none` (tests/e2e/test_image.py runs it).

The container runs as production does: deploy/nats/nats.conf (TLS, NATS accounts) for its embedded nats-server, with
the certificates of `engram certs` and the accounts, seeds and registry of `engram tenants`, made on the host for the
test and mounted read-only.

The slow parts are cached and keyed: the base image is tagged by a hash of its recipe, the wheels image by a hash of
the pinned requirements, and Docker's layer cache keeps every step before the code; so a second run rebuilds only
engram's code layers. The work starts in a background thread when the image test is collected (tests/e2e/conftest.py)
and runs at low priority, so it overlaps the other tests; the test waits for it at the end of the session.
"""
import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.tenancy.folder import TenantsFolder

ROOT = Path(__file__).parents[2]
REQUIRED = "IMAGE_REQUIRED"  # set by `make test`: no Docker engine fails the image test, never skips it
# One tag per checkout, so test sessions of two checkouts on one machine never run each other's image.
IMAGE = f"engram:test-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]}"
CONTAINER = f"engram-image-test-{os.getpid()}"
UID = "10001:10001"  # the Dockerfile's numeric user
# The base for the test: Debian's own python3.11 (with venv, and `python` on PATH as the Dockerfile calls it) on a
# minimal bookworm. debootstrap takes its default mirror, as apt on these machines does.
BASE_RECIPE = ("debootstrap", "--variant=minbase", "--include=python3.11,python3-venv,python-is-python3", "bookworm")
BASE_TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale")
BUILD_REQUIREMENTS = ("setuptools>=68",)  # what `pip install .` needs to build engram and its client, offline
NICE = ("nice", "-n", "15")
# deploy/nats/nats.conf reads its certificates from /etc/nats/tls and includes accounts/accounts.conf from beside
# itself: the tenants folder's accounts/ is mounted there, as a folder (a file mounted alone would keep showing the
# accounts the container started with). The whole tenants folder (engram's seed, the registry, the system account's
# seed for `engram tenants reload` and the tenants' seeds for `docker exec`) sits apart, at /etc/engram/tenants.
NATS_CONF = ROOT / "deploy" / "nats" / "nats.conf"
IN_CONTAINER_NATS = "/etc/nats"
IN_CONTAINER_TLS = f"{IN_CONTAINER_NATS}/tls"
IN_CONTAINER_ACCOUNTS = f"{IN_CONTAINER_NATS}/accounts"
IN_CONTAINER_TENANTS = "/etc/engram/tenants"
IN_CONTAINER_FOLDER = TenantsFolder(Path(IN_CONTAINER_TENANTS))
CA = f"{IN_CONTAINER_TLS}/ca.pem"
DEMO_TENANT = "demo"  # the tenant `engram demo` uses
DEMO_SEED = str(IN_CONTAINER_FOLDER.tenant_seed(DEMO_TENANT))


def docker_unreachable() -> str | None:
    """Why no Docker engine answers here, or None when one does."""
    binary = shutil.which("docker")
    if binary is None:
        return "no docker client on PATH: `make docker-engine` installs Debian's docker.io and starts dockerd"
    info = subprocess.run([binary, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                          timeout=60)
    if info.returncode != 0:
        return f"no Docker engine answers ({info.stderr.strip()[:300]}): `make docker-engine` starts one (as root)"
    return None


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _run(argv: list[str], log: Path, **kwargs: Any) -> None:
    """Run one step, its output appended to the build log; a failure names the step and the log."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False, **kwargs)
    if result.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"`{' '.join(argv[:4])} …` exited {result.returncode}; end of {log}:\n{tail}")


def _has_image(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60).returncode == 0


def _drop_other_keys(tag: str, log: Path) -> None:
    """Remove the images of the same name under older keys (a changed recipe or pin made them stale)."""
    name = tag.split(":")[0]
    listed = subprocess.run(["docker", "image", "ls", name, "--format", "{{.Repository}}:{{.Tag}}"],
                            capture_output=True, text=True, timeout=60).stdout.split()
    stale = [other for other in listed if other != tag]
    if stale:  # only untagged where a cached layer still builds on it; never a reason to fail
        with log.open("a") as out:
            subprocess.run(["docker", "rmi", *stale], stdout=out, stderr=subprocess.STDOUT, timeout=120)


def _import(folder: Path, tag: str, log: Path, *members: str) -> None:
    """`tar | docker import`: the folder's members (all of it by default) become a one-layer image."""
    with subprocess.Popen(["tar", "-C", str(folder), "-c", *(members or (".",))], stdout=subprocess.PIPE) as tar:
        _run(["docker", "import", "-", tag], log, stdin=tar.stdout)
    if tar.returncode != 0:
        raise RuntimeError(f"tar of {folder} exited {tar.returncode}")


def base_image(log: Path) -> str:
    """The Debian base, built by debootstrap once per recipe (minutes, mostly downloads), then taken from Docker."""
    tag = f"engram-test-base:{_digest(*BASE_RECIPE, *BASE_TRIM)}"
    if _has_image(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="engram-base-", dir="/var/tmp") as folder:
        rootfs = Path(folder) / "rootfs"
        _run([*NICE, *BASE_RECIPE, str(rootfs)], log)
        for trimmed in BASE_TRIM:  # caches and docs the image never reads
            for child in (rootfs / trimmed).glob("*"):
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        _import(rootfs, tag, log)
    _drop_other_keys(tag, log)
    return tag


def _requirements() -> list[str]:
    """What the Dockerfile installs from an index: the server's dependencies, the light client's own in place of the
    client (the Dockerfile installs that from clients/python)."""
    def listed(pyproject: Path) -> list[str]:
        dependencies: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
        return dependencies

    server = [r for r in listed(ROOT / "pyproject.toml") if not r.replace(" ", "").startswith("engram-client")]
    return [*server, *listed(ROOT / "clients" / "python" / "pyproject.toml")]


def wheels_image(log: Path) -> str:
    """An image holding /wheels: every dependency as a wheel for this Python, pinned to the versions of the venv
    the tests run in, keyed by those pins (pip's own cache makes a rebuild quick)."""
    pins = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
                          capture_output=True, text=True, check=True, timeout=120).stdout
    tag = "engram-wheels:" + _digest(*_requirements(), *BUILD_REQUIREMENTS, pins, platform.python_version())
    if _has_image(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="engram-wheels-") as folder:
        wheels, constraints = Path(folder) / "wheels", Path(folder) / "constraints.txt"
        constraints.write_text(pins)
        _run([*NICE, sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "-w", str(wheels),
              "-c", str(constraints), *_requirements(), *BUILD_REQUIREMENTS], log)
        _import(Path(folder), tag, log, "wheels")
    _drop_other_keys(tag, log)
    return tag


def build(log: Path) -> str:
    """Build the real Dockerfile on the Debian base with the wheels, no network inside the build; the image's id."""
    base, wheels = base_image(log), wheels_image(log)
    with tempfile.TemporaryDirectory(prefix="engram-build-") as folder:
        iidfile = Path(folder) / "iid"
        _run([*NICE, "docker", "build", "--network", "none", "--build-arg", f"PYTHON_IMAGE={base}",
              "--build-arg", f"WHEELS={wheels}", "--build-arg", "PIP_NO_INDEX=1", "--iidfile", str(iidfile),
              "-t", IMAGE, str(ROOT)], log,
             env={**os.environ, "DOCKER_BUILDKIT": "0"})  # the classic builder: Debian's dockerd, no buildx plugin
        built = iidfile.read_text().strip()
    # A rebuild leaves the previous image untagged: drop it (only engram's, by its label).
    _run(["docker", "image", "prune", "--force", "--filter", "label=org.opencontainers.image.title=engram"], log)
    return built


def _engram(*args: str, log: Path) -> None:
    """Run the venv's `engram` command as an operator would, with no ENGRAM_* variable of the shell running the
    tests (`engram tenants add` would otherwise try to reload a NATS server it names)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ENGRAM_")}
    _run([str(Path(sys.executable).parent / "engram"), *args], log, env=env)


def _readable_by_container(folder: Path) -> None:
    """Hand the folder to the container's numeric user: the keys and seeds are 0600 (and their folders 0700) for
    whoever made them, and the container reads them as 10001. As root, chown them to it; otherwise (a docker group
    member) open them to everyone, which is safe only because the folder lies inside the test's private (0700)
    temporary folder."""
    uid, gid = (int(part) for part in UID.split(":"))
    for path in [folder, *folder.rglob("*")]:
        if os.geteuid() == 0:
            os.chown(path, uid, gid)
        else:
            path.chmod(0o755 if path.is_dir() else 0o644)


def make_secrets(folder: Path, log: Path) -> Path:
    """What an operator makes before the first start, with the real CLI: `engram certs` (folder/tls) and `engram
    tenants init` + `engram tenants add demo` (folder/tenants); the folder, readable by the container's user."""
    _engram("certs", "--out", str(folder / "tls"), log=log)
    _engram("tenants", "init", "--dir", str(folder / "tenants"), log=log)
    _engram("tenants", "add", DEMO_TENANT, "--dir", str(folder / "tenants"), log=log)
    _readable_by_container(folder)
    return folder


def secrets_folder(log: Path) -> Path:
    """Where start_container made the secrets the container mounts."""
    return log.parent / "secrets"


def add_tenant(tenant: str, log: Path) -> str:
    """`engram tenants add` on the host, into the tenants folder the running container mounts (no reload: the
    container has no network; reload inside it); the new seed's path in the container."""
    secrets = secrets_folder(log)
    _engram("tenants", "add", tenant, "--dir", str(secrets / "tenants"), log=log)
    _readable_by_container(secrets)
    return str(IN_CONTAINER_FOLDER.tenant_seed(tenant))


def _read_only(source: Path, target: str) -> tuple[str, str]:
    return "--mount", f"type=bind,source={source},target={target},readonly"


def start_container(built: str, log: Path) -> None:
    """Run `engram up` from the image as its numeric user, root filesystem read-only, data in a tmpfs, no network,
    its embedded nats-server on deploy/nats/nats.conf: TLS and NATS accounts, from secrets made beside the log."""
    subprocess.run(["docker", "rm", "--force", CONTAINER], capture_output=True, timeout=60)
    secrets = make_secrets(secrets_folder(log), log)
    tenants = TenantsFolder(secrets / "tenants")
    _run(["docker", "run", "--detach", "--name", CONTAINER, "--network", "none", "--read-only",
          "--tmpfs", f"/data:uid={UID.split(':')[0]},gid={UID.split(':')[1]},mode=0700", "--user", UID,
          *_read_only(NATS_CONF, f"{IN_CONTAINER_NATS}/nats.conf"),
          *_read_only(tenants.accounts_file.parent, IN_CONTAINER_ACCOUNTS),
          *_read_only(secrets / "tls", IN_CONTAINER_TLS),
          *_read_only(tenants.root, IN_CONTAINER_TENANTS),
          "--env", f"ENGRAM_NATS_CONFIG={IN_CONTAINER_NATS}/nats.conf",
          "--env", f"ENGRAM_NATS_NKEY_SEED_FILE={IN_CONTAINER_FOLDER.engram_seed}",
          "--env", f"ENGRAM_NATS_TLS_CA_FILE={CA}",
          "--env", f"ENGRAM_TENANTS_FILE={IN_CONTAINER_FOLDER.registry_file}",
          built], log)


def stop_container() -> None:
    """Remove the test's container, if it is there."""
    with contextlib.suppress(FileNotFoundError, subprocess.TimeoutExpired):
        subprocess.run(["docker", "rm", "--force", CONTAINER], capture_output=True, timeout=60)


@dataclass
class Background:
    """The build (and the container's start) in a thread: the error or skip reason it met, once done."""

    log: Path
    unreachable: str | None = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    finished: bool = False  # the session is over: start no container, remove the one started
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        """Build the image and start its container; never raises (the test reports what happened)."""
        try:
            self.unreachable = docker_unreachable()
            if self.unreachable is None:
                built = build(self.log)
                with self.lock:
                    if not self.finished:
                        start_container(built, self.log)
        except BaseException as exc:  # handed to the test, which fails with it
            self.error = exc
        finally:
            self.done.set()

    def finish(self) -> None:
        """End of the session: remove the container, or make sure it is never started (a build still running is
        left to finish on its own; its layers are cached for the next run), and the build log's folder once the
        build went well (a failure's message points to the log, which stays)."""
        with self.lock:
            self.finished = True
            stop_container()
            if self.done.is_set() and self.error is None:
                shutil.rmtree(self.log.parent, ignore_errors=True)



def start_background(log: Path) -> Background:
    """Start the build and the container in a daemon thread; the returned record fills in as it goes."""
    background = Background(log)
    threading.Thread(target=background.run, name="engram-image-build", daemon=True).start()
    return background
