"""Percentiles and the small numeric helpers every benchmark table needs."""
import statistics


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    """p50, p95, p99 and mean of latency samples in milliseconds."""
    if not samples_ms:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0}
    ordered = sorted(samples_ms)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": statistics.median(ordered), "p95": at(0.95), "p99": at(0.99), "mean": statistics.fmean(ordered)}
