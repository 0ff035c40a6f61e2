"""How `make test` spreads the suite over pytest-xdist workers."""
import pytest


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker (not the controller, nor a run in one process)."""
    return hasattr(config, "workerinput")


# The modules that take longest (seconds in a clean-clone run, mostly waiting: an image build, a soak, kills and
# restarts, a real model on one thread, raft snapshots), handed out first, longest first, so that none of them
# starts last and leaves the other workers idle at the end.
SLOW_FIRST = ("test_image.py", "test_locomo", "test_forget_on_disk.py", "test_real_model.py", "test_large_turns.py",
              "test_bench.py", "test_chaos_consolidator.py", "test_soak.py", "test_rebuild.py", "test_crash.py",
              "test_nats_cluster.py", "test_poison.py", "test_windows.py", "test_transfer.py")


def _rank(item: pytest.Item) -> int:
    name = item.path.name
    return next((i for i, slow in enumerate(SLOW_FIRST) if name.startswith(slow)), len(SLOW_FIRST))


def slow_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker, order the collection so that the slow modules are handed out first (the scheduler
    keeps the collection's order); in one process leave it as it is."""
    if is_worker(config):
        items.sort(key=_rank)  # stable: the rest keep their order


def module_scheduling(config: pytest.Config, log: object) -> object:
    """A module at a time per worker (each module-scoped stack starts once), and the LoCoMo modules (`test_locomo*`)
    together: they share a session fixture that costs about 45 s of embedding, built once on their worker. Modules
    are handed out in the collection's order (`slow_first`), not xdist's default of the most tests first, which
    handed the slow one-test modules out last."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "locomo" if module.rpartition("/")[2].startswith("test_locomo") else module

    return ModuleScheduling(config, log)
