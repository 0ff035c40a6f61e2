"""An evaluation report as one table per k, averaged over conversations, in Markdown and JSON."""
import statistics
from pathlib import Path

from shared.evaluation.baselines import BASELINES
from shared.evaluation.locomo import CATEGORY_NAMES
from shared.evaluation.locomo_run import ENGRAM, EvalReport
from shared.evaluation.scoring import SystemScore

LABELS = {ENGRAM: "engram (fast)", **{b.name: b.label for b in BASELINES}}
SHORT = {ENGRAM: "engram", **{b.name: b.short for b in BASELINES}}
COLUMNS = ["system", "all@k", "any@k", "frac@k", "multi-hop", "temporal", "open-dom.", "single-hop", "tokens",
           "of conv."]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def average(report: EvalReport, system: str, k: int) -> dict[str, float]:
    """Mean over conversations of one system's scores at k (categories averaged where present)."""
    rows = [s for s in report.scores if s.system == system and s.k == k]
    out = {"all": _mean([s.overall.all_at_k for s in rows]), "any": _mean([s.overall.any_at_k for s in rows]),
           "frac": _mean([s.overall.frac_at_k for s in rows]),
           "tokens": _mean([s.mean_context_tokens for s in rows]), "ratio": _mean([s.context_ratio for s in rows])}
    for category in (1, 2, 3, 4):
        present = [s.categories[category].all_at_k for s in rows if category in s.categories]
        out[f"cat{category}"] = _mean(present) if present else float("nan")
    return out


def table_rows(report: EvalReport, k: int, conversation: str | None = None,
               short: bool = False) -> list[list[str]]:
    """One row per system at k, for one conversation or averaged over all."""
    systems = [ENGRAM, *[b.name for b in BASELINES]]
    out = []
    for system in systems:
        if conversation is None:
            v = average(report, system, k)
        else:
            [s] = [s for s in report.scores if s.system == system and s.k == k and s.conversation == conversation]
            v = _values(s)
        cats = [("—" if v[f"cat{c}"] != v[f"cat{c}"] else f"{v[f'cat{c}']:.3f}") for c in (1, 2, 3, 4)]
        label = (SHORT if short else LABELS)[system]
        if system == ENGRAM and not short:
            label = f"engram ({report.mode})"
        out.append([label, f"{v['all']:.3f}", f"{v['any']:.3f}", f"{v['frac']:.3f}", *cats,
                    f"{v['tokens']:.0f}", f"{v['ratio']:.1%}"])
    return out


def _values(s: SystemScore) -> dict[str, float]:
    out = {"all": s.overall.all_at_k, "any": s.overall.any_at_k, "frac": s.overall.frac_at_k,
           "tokens": s.mean_context_tokens, "ratio": s.context_ratio}
    for c in (1, 2, 3, 4):
        out[f"cat{c}"] = s.categories[c].all_at_k if c in s.categories else float("nan")
    return out


def markdown(report: EvalReport) -> str:
    """The whole report as Markdown: one table per k (averaged), then per conversation at each k."""
    conversations = sorted({s.conversation for s in report.scores})
    lines = [f"# engram eval locomo ({report.mode} mode)", "",
             f"Conversations: {', '.join(conversations)}; machine: {report.machine.get('cores')} cores, "
             f"{report.machine.get('memory_gb')} GB; token budget: {report.token_budget or 'none'}.",
             f"Recall latency over NATS: p50 {report.latency.p50:.1f} ms, p95 {report.latency.p95:.1f} ms "
             f"({report.latency.n} requests).",
             "Ingest (publish → recallable): " + ", ".join(
                 f"{i.conversation}: {i.turns} turns in {i.seconds:.1f} s ({i.turns_per_s:.1f} turns/s)"
                 for i in report.ingest), "",
             "Categories: " + ", ".join(f"{c} {CATEGORY_NAMES[c]}" for c in (1, 2, 3, 4)) + "; columns under them "
             "are all@k. `tokens`: mean context tokens; `of conv.`: that as a share of the whole conversation.", ""]
    if report.llm_tokens:
        lines += ["Chat-model tokens per conversation (ingest and recall, counted by the metrics): " + "; ".join(
            f"{name}: {sum(used.values())} ({', '.join(f'{p} {n}' for p, n in used.items())})"
            for name, used in sorted(report.llm_tokens.items())), ""]
    for scope in [None, *conversations]:
        for k in report.ks:
            lines.append(f"## {'mean of ' + ', '.join(conversations) if scope is None else scope}, k = {k}")
            lines.append("")
            lines.append("| " + " | ".join(COLUMNS) + " |")
            lines.append("|" + "---|" * len(COLUMNS))
            lines += ["| " + " | ".join(r) + " |" for r in table_rows(report, k, scope)]
            lines.append("")
    return "\n".join(lines)


def write(report: EvalReport, out_dir: Path) -> tuple[Path, Path]:
    """Write report.json and report.md into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "report.json", out_dir / "report.md"
    json_path.write_text(report.model_dump_json(indent=2))
    md_path.write_text(markdown(report))
    return json_path, md_path
