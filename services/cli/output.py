"""How the CLI prints replies and reports: tables on the terminal."""
import statistics

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engram_client.contract import ConsolidationSummary, EntryView, ForgetResult, RecallResponse
from services.cli.base import console
from shared.evaluation import curve as curves
from shared.evaluation.locomo_run import EvalReport
from shared.evaluation.report import COLUMNS, table_rows
from shared.evaluation.updates_run import UpdatesReport


def recall_table(reply: RecallResponse, explain: bool) -> None:
    """Recalled entries, best first, with why they matched when asked."""
    table = Table(show_lines=True)
    for column, justify in (("#", "right"), ("score", "right"), ("memory", "left"), ("sources", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for i, entry in enumerate(reply.entries, start=1):
        text = escape(entry.text) if entry.kind == "episodic" else escape(f"[{entry.kind}] {entry.text}")
        if explain and entry.explanation:
            x = entry.explanation
            text += "\n[dim]" + escape(f"dense #{x.dense_rank} ({x.dense_score}) sparse #{x.sparse_rank} "
                                       f"({x.sparse_score}) terms {x.matched_terms} boosts {x.boosts}") + "[/dim]"
            if x.ordering:
                text += "\n[dim]" + escape("\n".join(f"order: {why}" for why in x.ordering)) + "[/dim]"
            if x.hop == 2:
                text += "\n[dim]" + escape("\n".join(f"second hop: {why}" for why in x.via)) + "[/dim]"
        sources = ", ".join(entry.source_turn_ids) + ("\n[dim](excerpt)[/dim]" if entry.excerpt else "")
        table.add_row(str(i), f"{entry.score:.3f}", text, sources)
    console.print(table)
    t = reply.timings_ms
    console.print(f"[dim]{len(reply.entries)} entries, context {reply.context_tokens} tokens, "
                  f"embed {t.embed:.1f} ms, search {t.search:.1f} ms, total {t.total:.1f} ms[/dim]")
    if reply.left_out:
        console.print(f"[dim]{reply.left_out} relevant entries ({reply.left_out_tokens} tokens) did not fit the "
                      f"budget[/dim]")
    if explain and reply.plan:
        p = reply.plan
        console.print(escape(f"plan: {p.language}, asks about {p.orientation} ({p.orientation_cue}); names "
                             f"{p.names[:6]}; about the turns of {p.roles or 'anyone'}; times "
                             f"{[t.phrase for t in p.times]}; figure {p.figure}; order of events {p.sequence}; "
                             f"at most {p.limit} within {p.token_budget} tokens; "
                             f"{p.candidates} candidates, {p.second_hop} by the second hop"), style="dim")


def entries_table(entries: list[EntryView]) -> None:
    """Stored entries, one row each."""
    table = Table(show_lines=True)
    for column in ("id", "kind", "conversation", "occurred", "text", "sources", "replaced by"):
        table.add_column(column)
    for e in entries:
        replaced = (f"superseded by {e.superseded_by}" if e.superseded_by
                    else f"possibly outdated by {e.outdated_by}" if e.outdated_by
                    else f"merged into {e.merged_into}" if e.merged_into else "")
        table.add_row(e.id, e.kind, e.conversation_id, e.occurred_at.isoformat(), e.text, ", ".join(e.source_turn_ids),
                      replaced)
    console.print(table)


def forget_receipt(receipt: ForgetResult) -> None:
    """What Forget deleted in each place, and what the check afterwards found."""
    table = Table("place", "deleted", "left after the check")
    for place, deleted in receipt.deleted.model_dump().items():
        table.add_row(place.replace("_", " "), str(deleted), str(getattr(receipt.remaining, place)))
    console.print(table)
    console.print("[green]verified: nothing of it is left[/green]" if receipt.verified
                  else "[red]not verified: something is left (see the table); run forget again[/red]")


def consolidation_summary(summary: ConsolidationSummary) -> None:
    """What one consolidation run changed."""
    table = Table("owners", "scored", "superseded", "merged", "forgotten", "profiles updated", "ms")
    table.add_row(*(str(v) for v in (summary.owners, summary.scored, summary.superseded, summary.merged,
                                     summary.forgotten, summary.profiles_updated)), f"{summary.duration_ms:.0f}")
    console.print(table)


def eval_tables(report: EvalReport) -> None:
    """One table per k, averaged over the conversations, and the latency and ingest figures."""
    conversations = sorted({s.conversation for s in report.scores})
    for k in report.ks:
        table = Table(title=f"LoCoMo evidence recall, mean of {', '.join(conversations)}, k = {k}")
        for column in COLUMNS:
            table.add_column(column, justify="left" if column == "system" else "right")
        for values in table_rows(report, k, short=True):
            table.add_row(*values)
        console.print(table)
    console.print(f"recall over NATS: p50 {report.latency.p50:.1f} ms, p95 {report.latency.p95:.1f} ms; "
                  + "; ".join(f"{i.conversation} ingested at {i.turns_per_s:.1f} turns/s" for i in report.ingest))
    for name, used in sorted(report.llm_tokens.items()):
        console.print(f"{name}: {sum(used.values())} chat-model tokens ("
                      + ", ".join(f"{purpose} {n}" for purpose, n in used.items()) + ")")


def curve_table(curve: curves.Curve) -> None:
    """Recall against tokens: one row per system and budget, all-evidence recall overall and by question type."""
    table = Table(title=f"All-evidence recall against tokens, {curve.dataset} ({curve.mode} mode)")
    for column in curves.columns(curve):
        table.add_column(column, justify="left" if column == "system" else "right")
    rows = curves.table_rows(curve)
    for i, values in enumerate(rows):
        table.add_row(*values, end_section=i + 1 < len(rows) and rows[i + 1][0] != values[0])
    console.print(table)
    console.print(f"engram: ingest {curve.ingest_s:.1f} s; recall over NATS p50 {curve.latency.p50:.1f} ms, "
                  f"p95 {curve.latency.p95:.1f} ms ({curve.latency.n} requests)")


def updates_tables(report: UpdatesReport) -> None:
    """The update stories' figures: overall, per language, and per language and kind of change."""
    tokens = f", {statistics.fmean(report.context_tokens):.0f} context tokens" if report.context_tokens else ""
    asked = (f"token budget {report.token_budget}" if report.token_budget else f"k = {report.k}") + tokens
    table = Table(title=f"Update stories ({report.split}), {asked}, "
                        f"{'after' if report.consolidated else 'without'} consolidate")
    for column in ("group", "stories", "present", "old above", "top current", "past", "past@k", "unchanged",
                   "unchanged@k", "unchanged top", "unchanged top 3", "stale profiles", "profiles current",
                   "facts current", "facts stale"):
        table.add_column(column, justify="left" if column == "group" else "right")
    groups = [("all", report.overall), *report.by_language.items(), *report.by_change.items()]
    for name, f in groups:
        table.add_row(name, str(f.stories), str(f.present), f"{f.old_above:.1%}", f"{f.top_current:.1%}",
                      str(f.past), f"{f.past_at_k:.1%}", str(f.unchanged), f"{f.unchanged_at_k:.1%}",
                      f"{f.unchanged_top:.1%}", f"{f.unchanged_top3:.1%}", str(f.stale_profiles),
                      str(f.profiles_current), str(f.facts_current), str(f.facts_stale))
    Console(width=max(console.width, 185)).print(table)  # wider than a terminal: the report has 15 columns
    console.print(f"ingest {report.ingest_s:.1f} s")
