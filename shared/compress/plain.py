"""A window as plain dated lines, with nothing read into it: what is stored when the window's text work ran past its
time budget or kept failing. No pattern, no parser: its time is linear in the window's length by construction."""
from datetime import datetime

from shared.compress.model import Draft, Window, turn_lines


def _day(ts: datetime) -> str:
    return f"{ts.strftime('%a')} {ts.day} {ts.strftime('%B %Y')}"


def plain_episode(window: Window) -> Draft:
    """The window's turns, dated by day, each as `speaker: text`; no fact, no keyword, no relative date resolved."""
    turns = sorted(window.turns, key=lambda t: t.ts)
    lines: list[str] = []
    spoken: list[tuple[int, str]] = []  # each turn's entry in `lines`, and its speaker
    day = None
    for turn in turns:
        if _day(turn.ts) != day:
            day = _day(turn.ts)
            lines.append(f"[{day}]")
        spoken.append((len(lines), turn.speaker))
        lines.append(f"{turn.speaker}: {turn.text.strip()}")
    return Draft(text="\n".join(lines), persons=sorted({t.speaker for t in turns}), occurred_at=turns[0].ts,
                 source_turn_ids=[t.turn_id for t in turns], turn_lines=turn_lines(lines, spoken))
