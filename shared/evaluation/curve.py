"""Recall against tokens (issue 37): all-evidence recall of each system at each token budget, as table rows, JSON
and a dependency-free SVG line chart for the docs."""
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from pydantic import BaseModel, Field

from engram_client.contract import MAX_TOKEN_BUDGET
from shared.evaluation.latency import Percentiles
from shared.evaluation.machine import describe

IN_ORDER = "in order"  # the column of ordering questions whose events came in order (multi-session stories)


def parse_budgets(text: str) -> list[int]:
    """Token budgets from a comma list ("500,1000,2000"), ascending and each once; ValueError says what is wrong."""
    budgets = set()
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit():
            what = "an empty item" if not part else f"{part!r} is not a whole number"
            raise ValueError(f"budgets must be a comma list of whole numbers of tokens, e.g. 500,1000,2000,4000: "
                             f"{what}")
        budget = int(part)
        if not 1 <= budget <= MAX_TOKEN_BUDGET:
            raise ValueError(f"a budget must be between 1 and {MAX_TOKEN_BUDGET} tokens (a recall's limit), "
                             f"not {budget}")
        budgets.add(budget)
    return sorted(budgets)


@dataclass(frozen=True)
class Answer:
    """One question's outcome at one budget, as the curve counts it."""

    type: str
    found: bool                  # every evidence turn among the sources of what fitted in the budget
    tokens: int                  # tokens of the context it cost
    in_order: bool | None = None  # ordering questions: found, and the events in the order they happened


class Point(BaseModel):
    """One system at one budget."""

    system: str
    budget: int
    questions: int = 0
    all_evidence: float = 0.0
    by_type: dict[str, float] = Field(default_factory=dict)
    questions_by_type: dict[str, int] = Field(default_factory=dict)
    in_order: float | None = None
    mean_context_tokens: float = 0.0


def point(system: str, budget: int, answers: Sequence[Answer]) -> Point:
    """The figures of these answers (every question counts once: pooled over conversations or stories)."""
    if not answers:
        return Point(system=system, budget=budget)
    types = sorted({a.type for a in answers})
    ordering = [a for a in answers if a.in_order is not None]
    return Point(system=system, budget=budget, questions=len(answers),
                 all_evidence=sum(a.found for a in answers) / len(answers),
                 by_type={t: _share([a.found for a in answers if a.type == t]) for t in types},
                 questions_by_type={t: sum(a.type == t for a in answers) for t in types},
                 in_order=_share([bool(a.in_order) for a in ordering]) if ordering else None,
                 mean_context_tokens=sum(a.tokens for a in answers) / len(answers))


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


class Curve(BaseModel):
    """Every system's points on one data set, with what the run was."""

    dataset: str
    mode: str = "fast"
    budgets: list[int] = Field(default_factory=list)
    systems: dict[str, str] = Field(default_factory=dict)  # name -> label, in the order tables and legends use
    types: list[str] = Field(default_factory=list)         # question types, in column order
    points: list[Point] = Field(default_factory=list)
    ingest_s: float = 0.0                                   # engram: publish -> every turn recallable
    latency: Percentiles = Field(default_factory=Percentiles)  # engram's recall round trips (ms)
    machine: dict[str, object] = Field(default_factory=describe)

    def at(self, system: str, budget: int) -> Point | None:
        """The point of one system at one budget, if it was measured."""
        return next((p for p in self.points if p.system == system and p.budget == budget), None)


def columns(curve: Curve) -> list[str]:
    """Column names of the curve's table: system, budget, all evidence, each type (in order after ordering)."""
    types = [t.replace("_", "-") for t in curve.types]
    if any(p.in_order is not None for p in curve.points):
        types.insert(curve.types.index("ordering") + 1 if "ordering" in curve.types else len(types), IN_ORDER)
    return ["system", "budget", "all evidence", *types, "tokens"]


def table_rows(curve: Curve) -> list[list[str]]:
    """One row per system and budget: all-evidence recall overall and by type, and mean context tokens."""
    with_order = any(p.in_order is not None for p in curve.points)
    rows = []
    for system, label in curve.systems.items():
        for budget in curve.budgets:
            p = curve.at(system, budget)
            if p is None:
                continue
            cells = [f"{p.by_type[t]:.3f}" if t in p.by_type else "—" for t in curve.types]
            if with_order:
                cells.insert(curve.types.index("ordering") + 1 if "ordering" in curve.types else len(cells),
                             "—" if p.in_order is None else f"{p.in_order:.3f}")
            rows.append([label, str(budget), f"{p.all_evidence:.3f}", *cells, f"{p.mean_context_tokens:.0f}"])
    return rows


def markdown(curve: Curve) -> str:
    """The curve's table in Markdown, with how many questions each type has."""
    counts = next((p.questions_by_type for p in curve.points if p.questions), {})
    lines = [f"# Recall against tokens: {curve.dataset} ({curve.mode} mode)", "",
             "All-evidence recall (every evidence turn among the sources of what fits in the budget), by question "
             "type (" + ", ".join(f"{t} {counts.get(t, 0)}" for t in curve.types) + " questions); `tokens`: mean "
             "context tokens.", "", "| " + " | ".join(columns(curve)) + " |", "|" + "---|" * len(columns(curve))]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(curve)]
    return "\n".join(lines) + "\n"


# Colour-blind-safe (Okabe-Ito), each line also dashed its own way so that a grey print still tells them apart.
_STYLES = [("#0072B2", ""), ("#D55E00", "6 3"), ("#009E73", "2 3"), ("#CC79A7", "8 3 2 3"), ("#E69F00", "4 4"),
           ("#56B4E9", "1 2")]


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], x_ticks: Sequence[float], x_label: str,
               y_label: str, log_x: bool = True, width: int = 720, height: int = 440) -> str:
    """An SVG line chart: one polyline (with its points marked) per series, y from 0 to 1, a legend.

    Args:
        series: label -> (x, y) points; x within the ticks' range, y within 0..1.
        x_ticks: the x values to mark and label (their range is the axis's range).
    """
    left, right, top, bottom = 64, 32, 44, 128 + 20 * max(0, len(series) - 3)
    plot_w, plot_h = width - left - right, height - top - bottom
    inset = 28  # keeps the first and last points off the frame
    low, high = min(x_ticks), max(x_ticks)

    def fx(x: float) -> float:
        if high == low:
            return left + plot_w / 2
        scale = math.log if log_x else float
        share = (scale(x) - scale(low)) / (scale(high) - scale(low))
        return left + inset + share * (plot_w - 2 * inset)

    def fy(y: float) -> float:
        return top + (1 - min(1.0, max(0.0, y))) * plot_h

    def text(x: float, y: float, value: str, anchor: str = "middle", extra: str = "") -> str:
        return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(value)}</text>'

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="13">',
           f"<title>{escape(title)}</title>", f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           text(width / 2, 24, title, extra=' font-size="15" font-weight="bold"')]
    for i in range(6):  # y grid every 0.2
        y = fy(i / 5)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#dddddd"/>')
        out.append(text(left - 8, y + 4, f"{i / 5:.1f}", anchor="end"))
    for tick in x_ticks:
        x = fx(tick)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#eeeeee"/>')
        out.append(text(x, top + plot_h + 18, f"{tick:g}"))
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#555555"/>')
    out.append(text(left + plot_w / 2, top + plot_h + 40, x_label))
    out.append(text(18, top + plot_h / 2, y_label, extra=f' transform="rotate(-90 18 {top + plot_h / 2:.1f})"'))
    legend_y = top + plot_h + 62
    for i, (label, values) in enumerate(series.items()):
        colour, dash = _STYLES[i % len(_STYLES)]
        style = f'stroke="{colour}" stroke-width="2.5" fill="none"' + (f' stroke-dasharray="{dash}"' if dash else "")
        placed = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in sorted(values))
        out.append(f"<polyline data-series={quoteattr(label)} points=\"{placed}\" {style}/>")
        out += [f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3.5" fill="{colour}"/>' for x, y in values]
        y = legend_y + 20 * i
        out.append(f'<line x1="{left}" y1="{y - 4}" x2="{left + 36}" y2="{y - 4}" {style}/>')
        out.append(text(left + 44, y, label, anchor="start"))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def svg(curve: Curve) -> str:
    """The curve as a line chart: x the token budget (log scale), y all-evidence recall, one line per system."""
    series = {label: [(float(p.budget), p.all_evidence)
                      for b in curve.budgets if (p := curve.at(system, b)) is not None]
              for system, label in curve.systems.items()}
    return line_chart(f"All-evidence recall against context tokens: {curve.dataset}", series, curve.budgets,
                      "token budget of each recall (log scale)", "all-evidence recall")


def write(curve: Curve, out_dir: Path, stem: str = "curve") -> list[Path]:
    """Write `<stem>.json`, `<stem>.md` and `<stem>.svg` into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.json", out_dir / f"{stem}.md", out_dir / f"{stem}.svg"]
    for path, content in zip(paths, (curve.model_dump_json(indent=1), markdown(curve), svg(curve)), strict=True):
        path.write_text(content, encoding="utf-8")
    return paths
