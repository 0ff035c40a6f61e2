"""Settings of the evaluation and benchmark commands (not of any service), read from ENGRAM_* variables."""
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class EvalSettings(BaseSettings):
    """Where the evaluation data lives; a service never reads these."""

    model_config = SettingsConfigDict(env_prefix="ENGRAM_", frozen=True, extra="ignore")

    locomo_dir: Path = Path("../shared/datasets/locomo")  # LoCoMo conversations; never vendored into the repo
