"""Mergeable percentile sketches of durations: fixed log-scale buckets (docs/insight.md).

A duration of ``ms`` milliseconds above one second falls in bucket ``i = ceil(log(ms / 1000) /
log(GAMMA))``, which holds (1000 * GAMMA**(i-1), 1000 * GAMMA**i] ms; bucket 0 holds everything
up to one second. A bucket is read back as ``2 * 1000 * GAMMA**i / (GAMMA + 1)``, which is
within ``ALPHA`` of every duration the bucket holds, relatively, with ``GAMMA = (1 + ALPHA) /
(1 - ALPHA)`` (the DDSketch construction). The buckets are the same for every sketch, so
sketches merge by adding their counts, exactly: a p95 over 30 days is the p95 of the 30 days'
buckets summed, within ``ALPHA`` of the exact p95 of every duration in them (a p95 of 4 hours
within 2.4 minutes).

Why 1 %: the clocks are human (seconds to days), a chart cannot draw finer, and it keeps a
sketch to at most ~1 000 buckets (one second to ten years; a day's sketch holds only the
buckets its durations fell in, a few dozen in practice). Durations of a second or less are
read back as one second; negative ones (clocks of two machines a little apart) as zero-length,
in bucket 0.

Percentiles are nearest-rank: the p-th of n durations is the ceil(p * n)-th smallest, the same
definition as the exact percentiles of the tasks waiting now (``waiting.ages_at``).
"""

import math
from collections.abc import Iterable, Mapping

ALPHA = 0.01
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)
UNIT_MS = 1000
# Ten years; longer durations are counted in the last bucket.
MAX_BUCKET = math.ceil(math.log(10 * 365.25 * 86_400) / _LOG_GAMMA)


def bucket_of(ms: float) -> int:
    """The bucket a duration of ``ms`` milliseconds falls in."""
    if ms <= UNIT_MS:
        return 0
    return min(MAX_BUCKET, math.ceil(math.log(ms / UNIT_MS) / _LOG_GAMMA))


def value_of(bucket: int) -> float:
    """The duration (ms) bucket ``bucket`` is read back as."""
    if bucket <= 0:
        return float(UNIT_MS)
    return 2 * UNIT_MS * GAMMA**bucket / (GAMMA + 1)


def rank(fraction: float, count: int) -> int:
    """The nearest rank (1-based) of the ``fraction`` percentile of ``count`` values."""
    if not 0 < fraction <= 1:
        raise ValueError(f"a percentile is a fraction in (0, 1], not {fraction}")
    return max(1, math.ceil(fraction * count - 1e-9))


def percentile(buckets: Mapping[int, int], fraction: float) -> float | None:
    """The ``fraction`` percentile (ms) of a sketch given as {bucket: count}; ``None`` when it
    holds nothing."""
    total = sum(n for n in buckets.values() if n > 0)
    if total == 0:
        return None
    wanted = rank(fraction, total)
    seen = 0
    for bucket in sorted(buckets):
        seen += max(buckets[bucket], 0)
        if seen >= wanted:
            return value_of(bucket)
    return value_of(max(buckets))  # pragma: no cover -- the counts sum to total


def merged(sketches: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """Sketches added together (the same buckets everywhere: exact)."""
    total: dict[int, int] = {}
    for sketch in sketches:
        for bucket, n in sketch.items():
            total[bucket] = total.get(bucket, 0) + n
    return total
