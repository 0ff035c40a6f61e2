"""deploy/'s monitoring files and the `engram_*` metric names their PromQL reads."""
import json
import re
from pathlib import Path
from typing import Any

import yaml

from services import dashboard

ROOT = Path(__file__).parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "rules"
RULE_FILES = sorted(RULES.glob("*.yml"))
ALERTS_TEST = RULES / "tests" / "engram-alerts.test.yml"
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "engram.json"
EXPECTED_ALERTS = {"EngramPoison", "EngramTextBudgetExceeded", "EngramRecallLatencyHigh", "EngramConsumerLagGrowing",
                   "EngramDeadLetters",
                   "EngramConsolidationStale", "EngramLlmFallbackRate", "EngramNotReady", "EngramRepliesRefused",
                   "EngramQuotaRefusalsHigh", "EngramTenantNearStorageQuota", "EngramStateUnreadable",
                   "EngramLegacyTurnsStream"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME = re.compile(r"(?<![\w:$])[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The `engram_*` metric names a PromQL expression reads (label values and other strings left out)."""
    return {name for name in _NAME.findall(_STRING.sub('""', expr)) if name.startswith("engram_")}


def rules(path: Path) -> list[dict[str, Any]]:
    """Every rule of a Prometheus rule file."""
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]


def deploy_expressions() -> dict[str, list[str]]:
    """Every PromQL expression of the rule files and of the committed dashboard, by file name."""
    found = {path.name: [str(rule["expr"]) for rule in rules(path)] for path in RULE_FILES}
    found[DASHBOARD.name] = dashboard.expressions(json.loads(DASHBOARD.read_text()))
    return found


def used_metric_names() -> set[str]:
    """Every `engram_*` sample name deploy/'s rules and dashboard read."""
    return {name for exprs in deploy_expressions().values() for expr in exprs for name in metric_names(expr)}
