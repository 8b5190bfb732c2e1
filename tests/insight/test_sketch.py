"""The clocks' sketches (``insight/sketch.py``, docs/insight.md): a percentile read from a
sketch is within ``ALPHA`` (1 %) of the exact one, relatively, and sketches merge exactly —
a p95 over 30 days read from 30 day-sketches summed is the p95 of one sketch of every
duration, and within 1 % of the exact p95 of them all."""

import math
import random

import pytest

from orbit_console.insight import sketch

DAY_MS = 86_400_000


def exact(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[sketch.rank(fraction, len(ordered)) - 1]


def sketched(values: list[float]) -> dict[int, int]:
    found: dict[int, int] = {}
    for value in values:
        bucket = sketch.bucket_of(value)
        found[bucket] = found.get(bucket, 0) + 1
    return found


def within_alpha(estimate: float | None, truth: float) -> bool:
    assert estimate is not None
    if truth <= sketch.UNIT_MS:
        return estimate == sketch.UNIT_MS  # a second or less is read back as one second
    return abs(estimate - truth) <= sketch.ALPHA * truth * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_percentiles_are_within_one_percent_of_the_exact_ones(seed: int) -> None:
    rng = random.Random(seed)
    # Human clocks: from seconds to weeks, log-uniform, with repeated values and some under
    # a second.
    values = [math.exp(rng.uniform(math.log(200), math.log(14 * DAY_MS))) for _ in range(2000)]
    values += [rng.choice(values) for _ in range(200)]
    buckets = sketched(values)
    for fraction in (0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0):
        assert within_alpha(sketch.percentile(buckets, fraction), exact(values, fraction))


def test_thirty_day_sketches_merge_into_the_sketch_of_every_duration() -> None:
    rng = random.Random(30)
    days = [
        [rng.lognormvariate(math.log(3_600_000), 1.5) for _ in range(rng.randint(0, 80))]
        for _ in range(30)
    ]
    merged = sketch.merged(sketched(day) for day in days)
    every = [value for day in days for value in day]
    assert merged == sketched(every)
    assert within_alpha(sketch.percentile(merged, 0.95), exact(every, 0.95))


def test_bucket_edges_and_what_a_sketch_cannot_hold() -> None:
    assert sketch.bucket_of(-5_000) == sketch.bucket_of(0) == sketch.bucket_of(1000) == 0
    assert sketch.bucket_of(1001) == 1
    # Every bucket's reading is within ALPHA of both its edges.
    for bucket in (1, 10, 500, sketch.MAX_BUCKET - 1):
        low = sketch.UNIT_MS * sketch.GAMMA ** (bucket - 1)
        high = sketch.UNIT_MS * sketch.GAMMA**bucket
        assert sketch.bucket_of(high) == bucket
        assert within_alpha(sketch.value_of(bucket), high)
        assert within_alpha(sketch.value_of(bucket), low * (1 + 1e-12))
    # Longer than ten years: counted in the last bucket.
    assert sketch.bucket_of(100 * 365 * DAY_MS) == sketch.MAX_BUCKET < 2**15  # a SmallInteger
    assert sketch.percentile({}, 0.5) is None
    with pytest.raises(ValueError, match="fraction"):
        sketch.percentile({1: 1}, 0)
