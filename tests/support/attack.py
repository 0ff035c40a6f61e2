"""The attack suite's cast: a victim, an attacker with a small quota, a bystander, and what the victim stored."""
from dataclasses import dataclass

from engram_client.contract import Turn

# The attacker's quota is small, so that its limits are quick to reach; the victim's is the default.
ATTACKER_QUOTA = {"max_connections": 4, "max_subscriptions": 40, "turns_max_bytes": 1024 ** 2, "recall_per_s": 2.0,
                  "recall_burst": 4, "requests_per_s": 2.0, "requests_burst": 4, "max_unacked_turns": 50}


@dataclass
class Tenants:
    """A module's tenants."""

    victim: str
    attacker: str
    bystander: str


@dataclass
class VictimMemory:
    """What the victim stored before the attacks, and the turns of its still-open window."""

    stored: list[Turn]
    open_window: list[Turn]
