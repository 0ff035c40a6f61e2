"""The builds a rebuild replaced are kept for a rollback until the next forget, which deletes them; a rollback
across a forget is refused at start, so no forgotten person comes back. Qdrant Edge folders, the switch and the
forget's last step as the rebuild and the consolidator call them."""
from pathlib import Path

import pytest

from shared.errors import ConfigError
from shared.store import EdgeStore, Scope, builds
from tests.support.ids import unique
from tests.support.stacks import fast_settings
from tests.support.store import item


async def test_a_forget_deletes_the_replaced_builds_and_a_rollback_to_one_is_refused(tmp_path: Path) -> None:
    """initial → v2 → v3: each replaced build is marked retired and a rollback to it works while no forget came
    (the pointer rewritten by hand); a forget deletes both, a retired build this process still reads (a rebuild's
    carry-over) only once let go, and from then on neither a pointer naming v2 nor a missing pointer (the first
    build) starts."""
    settings = fast_settings(tmp_path)
    tenant = unique("builds")
    live = await builds.open_live(settings, 4)
    assert isinstance(live, EdgeStore)
    try:
        await live.upsert([item(tenant, ["t1"], dense=[1, 0, 0, 0], terms=[1], text="Ana keeps bees")])
        first = builds.live_edge_path(settings)
        await builds.switch(settings, live, "v2", await builds.open_build(settings, "v2", 4))
        assert (first / builds.RETIRED).exists()
        await builds.retire(settings, live)  # the rebuild's carry-over is done: the old shard is closed
        await builds.switch(settings, live, "v3", await builds.open_build(settings, "v3", 4))
        v2 = builds.edge_builds(settings) / "v2"
        assert (v2 / builds.RETIRED).exists() and builds.live_edge_path(settings).name == "v3"
        # A rollback before any forget is a pointer written by hand: allowed.
        pointer = first.with_name("qdrant.live")
        pointer.write_text("v2\n")
        assert builds.live_edge_path(settings) == v2
        pointer.write_text("v3\n")

        dropped = await builds.drop_retired(settings, live)  # v2 is still open here: doomed, not yet deleted
        assert sorted(dropped) == sorted([first.name, "v2"])
        assert not first.exists() and (v2 / builds.DOOMED).exists()
        await builds.retire(settings, live)
        assert not v2.exists()
        assert await live.count(Scope(tenant_id=tenant)) == 0  # v3 is the live, empty build (nothing carried here)
    finally:
        await live.close()
    pointer.write_text("v2\n")
    with pytest.raises(ConfigError, match="rollback across a forget is refused"):
        builds.live_edge_path(settings)
    pointer.unlink()
    with pytest.raises(ConfigError, match="rollback across a forget is refused"):
        builds.live_edge_path(settings)
