"""How the CLI prints replies and reports: tables on the terminal."""
from rich.table import Table

from services.cli.base import console
from shared.contract import ConsolidationSummary, EntryView, ForgetResult, RecallResponse
from shared.evaluation.locomo_run import EvalReport
from shared.evaluation.report import COLUMNS, table_rows


def recall_table(reply: RecallResponse, explain: bool) -> None:
    """Recalled entries, best first, with why they matched when asked."""
    table = Table(show_lines=True)
    for column, justify in (("#", "right"), ("score", "right"), ("memory", "left"), ("sources", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for i, entry in enumerate(reply.entries, start=1):
        text = entry.text
        if explain and entry.explanation:
            x = entry.explanation
            text += (f"\n[dim]dense #{x.dense_rank} ({x.dense_score}) sparse #{x.sparse_rank} ({x.sparse_score}) "
                     f"terms {x.matched_terms} boosts {x.boosts}[/dim]")
        table.add_row(str(i), f"{entry.score:.3f}", text, ", ".join(entry.source_turn_ids))
    console.print(table)
    t = reply.timings_ms
    console.print(f"[dim]{len(reply.entries)} entries, context {reply.context_tokens} tokens, "
                  f"embed {t.embed:.1f} ms, search {t.search:.1f} ms, total {t.total:.1f} ms[/dim]")


def entries_table(entries: list[EntryView]) -> None:
    """Stored entries, one row each."""
    table = Table(show_lines=True)
    for column in ("id", "kind", "conversation", "occurred", "text", "sources"):
        table.add_column(column)
    for e in entries:
        table.add_row(e.id, e.kind, e.conversation_id, e.occurred_at.isoformat(), e.text, ", ".join(e.source_turn_ids))
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
