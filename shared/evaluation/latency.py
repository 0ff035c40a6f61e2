"""Latency percentiles of a list of samples, as every report and benchmark table shows them."""
import statistics

from pydantic import BaseModel


class Percentiles(BaseModel):
    """p50, p95, p99 and mean of latency samples, in milliseconds."""

    n: int = 0
    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    mean: float = 0.0


def percentiles(samples_ms: list[float]) -> Percentiles:
    """The percentiles of `samples_ms` (inclusive method: p100 is the largest sample)."""
    if not samples_ms:
        return Percentiles()
    if len(samples_ms) == 1:
        only = samples_ms[0]
        return Percentiles(n=1, p50=only, p95=only, p99=only, mean=only)
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return Percentiles(n=len(samples_ms), p50=cuts[49], p95=cuts[94], p99=cuts[98],
                       mean=statistics.fmean(samples_ms))
