"""Settings for a stack of a test's own."""
from pathlib import Path

from shared.settings import Settings


def fast_settings(folder: Path) -> Settings:
    """Settings for a fast stack: short sweeps and grace so tests need not wait long, and never a fixed port."""
    return Settings(data_dir=folder / "data", nats_port=0, http_port=0, sweep_interval_s=0.2, seal_grace_s=1.0,
                    idle_timeout_s=2.0)
