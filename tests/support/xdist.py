"""How `make test` spreads the suite over pytest-xdist workers."""
import pytest


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker (not the controller, nor a run in one process)."""
    return hasattr(config, "workerinput")


def module_scheduling(config: pytest.Config, log: object) -> object:
    """A module at a time per worker (each module-scoped stack starts once), and the LoCoMo modules (`test_locomo*`)
    together: they share a session fixture that costs about 45 s of embedding, built once on their worker."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "locomo" if module.rpartition("/")[2].startswith("test_locomo") else module

    return ModuleScheduling(config, log)
