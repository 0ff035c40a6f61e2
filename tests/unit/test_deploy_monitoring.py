"""The monitoring part of deploy/: Prometheus config, recording rules and alerts (checked and unit-tested by the
real promtool), the generated Grafana dashboard, and that every engram metric they use is one engram declares."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

import shared.runtime.metrics  # noqa: F401  (registers every engram metric)
from services import dashboard
from tests.support.monitoring import (
    ALERTS_TEST,
    DASHBOARD,
    EXPECTED_ALERTS,
    GRAFANA,
    PROMETHEUS,
    RULE_FILES,
    RULES,
    metric_names,
    rules,
    used_metric_names,
)

RUNBOOK_ANCHOR = "#alerts-and-what-to-do"
# How prometheus_client names the samples of each metric type (labelled metrics have no samples until used).
_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum", "_created"),
             "summary": ("", "_count", "_sum", "_created"), "info": ("_info",), "stateset": ("",),
             "gaugehistogram": ("_bucket", "_gcount", "_gsum"), "unknown": ("",)}


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run the real promtool (Debian's prometheus package); fail, never skip, when it is missing."""
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is not installed; run `make system-deps` (installs Debian's prometheus package)")
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=60, check=False)


def declared_samples() -> dict[str, set[str]]:
    """The sample names each declared `engram_*` metric can expose, by metric family."""
    out: dict[str, set[str]] = {}
    for family in REGISTRY.collect():
        if family.name.startswith("engram_"):
            names = {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
            out[family.name] = names | {sample.name for sample in family.samples}
    return out


def test_promtool_accepts_the_config_and_the_rule_files_it_loads() -> None:
    """promtool accepts prometheus.yml and, through it, finds every rule file in deploy/prometheus/rules."""
    result = promtool("check", "config", PROMETHEUS / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(RULE_FILES)} rule files found" in result.stdout, result.stdout


def test_the_config_scrapes_the_three_services_every_15_seconds() -> None:
    """Prometheus scrapes every 15 seconds, loads rules/*.yml, and its engram job targets exactly the three services on
    port 9464, each labelled with its service, besides a job for Prometheus itself."""
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert config["global"]["scrape_interval"] == "15s"
    assert config["rule_files"] == ["rules/*.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = {(t, group["labels"]["service"]) for group in jobs["engram"]["static_configs"] for t in group["targets"]}
    assert targets == {("ingestor:9464", "ingestor"), ("retriever:9464", "retriever"),
                       ("consolidator:9464", "consolidator")}
    assert "prometheus" in jobs


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_accepts_each_rule_file(path: Path) -> None:
    """promtool accepts each rule file on its own."""
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alerts_fire_as_their_unit_tests_expect() -> None:
    """The alert unit tests cover exactly the expected alerts, and promtool passes every one of them."""
    tests = yaml.safe_load(ALERTS_TEST.read_text())["tests"]
    assert {case["alertname"] for test in tests for case in test.get("alert_rule_test", [])} == EXPECTED_ALERTS
    result = promtool("test", "rules", ALERTS_TEST)
    assert result.returncode == 0, result.stdout + result.stderr


def test_recording_rules_are_named_engram_what_window() -> None:
    """Recording rule names are unique and follow the engram:<what>:<window> form."""
    names = [rule["record"] for rule in rules(RULES / "engram-recording.yml")]
    assert names and len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"engram:[a-z0-9_]+:[a-z0-9]+", name), name


def test_every_alert_has_a_severity_and_says_what_to_do() -> None:
    """The rule files define exactly the expected alerts, each with a warning or critical severity, a summary, a
    description and a runbook link to the alerts section."""
    alerts = [rule for path in RULE_FILES for rule in rules(path) if "alert" in rule]
    assert {alert["alert"] for alert in alerts} == EXPECTED_ALERTS
    for alert in alerts:
        assert alert["labels"]["severity"] in {"warning", "critical"}, alert["alert"]
        annotations = alert["annotations"]
        assert annotations["summary"] and annotations["description"], alert["alert"]
        assert annotations["runbook"].endswith(RUNBOOK_ANCHOR), alert["alert"]


def test_the_committed_dashboard_is_the_generators_output() -> None:
    """The committed Grafana dashboard JSON is exactly what the dashboard generator renders."""
    assert DASHBOARD.read_text(encoding="utf-8") == dashboard.render(), (
        "deploy/grafana/dashboards/engram.json is stale: run `.venv/bin/python -m services.dashboard`")


def test_the_dashboard_has_its_rows_a_datasource_variable_and_no_overlapping_panels() -> None:
    """The generated dashboard has its five rows, a single datasource variable and unique panel ids; panels stay within
    the grid without overlapping, and every non-row panel queries through that variable."""
    board = dashboard.dashboard()
    titles = [p["title"] for p in board["panels"] if p["type"] == "row"]
    for row in ("Ingest", "Recall", "Consolidation", "Memory quality", "LLM cost"):
        assert row in titles
    assert [v["type"] for v in board["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= dashboard.GRID_WIDTH, panel["title"]
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses each query as a recording rule ($__rate_interval stands for a range, as Grafana fills in)."""
    exprs = dashboard.expressions(dashboard.dashboard())
    check = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}:check", "expr": expr.replace(dashboard.RATE, "1m")}
        for i, expr in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(check))
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_metric_names_are_read_from_promql_not_from_strings() -> None:
    """The metric-name reader returns the engram_* metrics an expression reads, not label values or recording-rule names
    that merely look alike."""
    expr = ('sum by (mode) (rate(engram_recall_seconds_bucket{mode="engram_fake"}[$__rate_interval])) / '
            "engram:recall_seconds_p99:5m + on() engram_ready")
    assert metric_names(expr) == {"engram_recall_seconds_bucket", "engram_ready"}


def test_every_engram_metric_the_rules_and_dashboard_use_is_declared() -> None:
    """Every engram_* sample the rules and dashboard read is one that a metric declared in shared/runtime/metrics.py can
    expose."""
    declared = set().union(*declared_samples().values())
    used = used_metric_names()
    assert {"engram_turns_total", "engram_recall_seconds_bucket", "engram_ready"} <= used
    assert used - declared == set(), "used in deploy/ but not declared in shared/runtime/metrics.py"


def test_every_declared_engram_metric_is_on_the_dashboard_or_in_a_rule() -> None:
    """A new metric in shared/runtime/metrics.py needs a panel in services/dashboard.py (or a rule)."""
    used = used_metric_names()
    unused = {family for family, samples in declared_samples().items() if not samples & used}
    assert unused == set()


def test_grafana_provisions_the_prometheus_datasource_and_the_dashboard_folder() -> None:
    """Grafana provisions the Prometheus datasource under the uid the dashboard's variable selects, and loads dashboards
    from the folder compose mounts them into."""
    sources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    (source,) = sources["datasources"]
    assert (source["type"], source["uid"], source["url"]) == ("prometheus", "prometheus", "http://prometheus:9090")
    assert dashboard.datasource_variable()["current"]["value"] == source["uid"]
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "engram.yml").read_text())
    (provider,) = providers["providers"]
    assert provider["type"] == "file" and provider["options"]["path"] == "/var/lib/grafana/dashboards"
