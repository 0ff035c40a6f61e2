"""When windows close and how the closer paces itself: built from Settings here, and nowhere else."""
from dataclasses import dataclass
from typing import Self

from shared.settings import Settings


@dataclass(frozen=True)
class WindowPolicy:
    """When windows close and how much of a conversation stays at hand."""

    window_turns: int
    recent_turns: int
    max_pending_windows: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        """The policy the settings describe."""
        return cls(window_turns=settings.window_turns, recent_turns=settings.recent_turns,
                   max_pending_windows=settings.max_pending_windows)


@dataclass(frozen=True)
class CloserPolicy:
    """Timing of the closer loop."""

    idle_timeout_s: float
    sweep_interval_s: float
    seal_grace_s: float  # a sealed window older than this is written by whichever replica sees it
    max_deliver: int     # failed attempts at writing a window before its turns are dead-lettered

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        """The policy the settings describe."""
        return cls(idle_timeout_s=settings.idle_timeout_s, sweep_interval_s=settings.sweep_interval_s,
                   seal_grace_s=settings.seal_grace_s, max_deliver=settings.max_deliver)
