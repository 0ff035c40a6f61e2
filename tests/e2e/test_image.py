"""The Docker image, built from the real Dockerfile with no registry and no network, run as production runs it."""
import contextlib
import subprocess

import pytest

from tests.support import image
from tests.support.polling import eventually

HEALTH_WAIT_S = 300  # the HEALTHCHECK's start period (60 s) and three failed checks fit well inside


def _docker(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s)


def _health() -> str:
    """The container's state and, while it runs, the verdict of the image's own HEALTHCHECK."""
    found = _docker("inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", image.CONTAINER)
    assert found.returncode == 0, found.stderr
    return found.stdout.strip()


async def _wait_for_health() -> str:
    """Poll until the health check settles (healthy or unhealthy) or the container stops; the state then, or
    still "running starting" after HEALTH_WAIT_S."""
    with contextlib.suppress(AssertionError):  # the test fails on the state, with the container's log
        # polling docker inspect once a second; the HEALTHCHECK's interval sets the pace
        return await eventually(_health, lambda state: state != "running starting", timeout_s=HEALTH_WAIT_S,
                                interval_s=1)
    return _health()


@pytest.mark.timeout(1800)  # run alone on a new machine, the wait for the build (debootstrap included) is here
async def test_the_image_runs_engram_read_only_as_its_user_healthy_and_answering_the_demo(
        image_build: image.Background) -> None:
    """The image built from the real Dockerfile (Debian base by debootstrap, wheels from the host, no network in the
    build) runs `engram up` as its numeric non-root user, on a read-only root filesystem with only a tmpfs at /data
    and no network: its own HEALTHCHECK turns healthy, and `engram demo` run inside the container is answered by that
    running engram (it does not fall back to a stack of its own), then the container stops cleanly."""
    state = await _wait_for_health()
    if state != "running healthy":
        logs = _docker("logs", "--tail", "60", image.CONTAINER)
        pytest.fail(f"container {state!r}; its log:\n{logs.stdout}{logs.stderr}")

    settings = _docker("inspect", "--format", "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} "
                       "{{.HostConfig.NetworkMode}}", image.CONTAINER)
    assert settings.stdout.split() == [image.UID, "true", "none"]
    identity = _docker("exec", image.CONTAINER, "id", "-u")
    assert identity.stdout.strip() == image.UID.split(":")[0]
    written = _docker("exec", image.CONTAINER, "touch", "/opt/engram/written")
    assert written.returncode != 0 and "Read-only file system" in written.stderr

    demo = _docker("exec", image.CONTAINER, "engram", "demo", timeout_s=300)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "no engram answers" not in demo.stdout, demo.stdout[-3000:]
    assert "Lisbon" in demo.stdout and "recall round trip" in demo.stdout, demo.stdout[-3000:]

    stopped = _docker("stop", "--time", "30", image.CONTAINER)
    assert stopped.returncode == 0, stopped.stderr
    exit_code = _docker("inspect", "--format", "{{.State.ExitCode}}", image.CONTAINER).stdout.strip()
    assert exit_code == "0", _docker("logs", "--tail", "50", image.CONTAINER).stderr
