"""Samples a benchmark can be believed from: the machine's idle time checked before
each one, and ratios given as intervals from the samples of both sides, never as one
number from two medians."""

import os
import random
import statistics
import time


def busy_cores(window=1.0):
    """Cores kept busy by every process on the machine over `window` seconds, from
    /proc/stat. Taken between samples, while the benchmark itself is idle, it is the
    load of other processes."""

    def ticks():
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle and iowait
        return sum(fields) - idle, sum(fields)

    busy0, total0 = ticks()
    time.sleep(window)
    busy1, total1 = ticks()
    if total1 == total0:
        return 0.0
    return (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)


def wait_for_quiet(limit, patience=30.0):
    """Waits up to `patience` seconds for other processes to use at most `limit` cores;
    returns the load last measured (above `limit` when the machine stayed busy)."""
    deadline = time.monotonic() + patience
    load = busy_cores()
    while load > limit and time.monotonic() < deadline:
        load = busy_cores()
    return load


def spread(samples):
    """(median, min, max)."""
    return statistics.median(samples), min(samples), max(samples)


def speed_ratio(seconds, baseline_seconds, iterations=2000, confidence=0.90, seed=1):
    """How fast a contestant is against a baseline (baseline time / contestant time),
    as (low, median, high): the ratio of the medians of bootstrap resamples of both
    sides' samples, and the central `confidence` share of those ratios. With one sample
    a side the interval is that one ratio."""
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(baseline_seconds, k=len(baseline_seconds)))
        / statistics.median(rng.choices(seconds, k=len(seconds)))
        for _ in range(iterations)
    )
    tail = (1 - confidence) / 2
    at = lambda q: ratios[min(len(ratios) - 1, int(q * len(ratios)))]  # noqa: E731
    return at(tail), statistics.median(ratios), at(1 - tail)


def rounds(contestants, count):
    """The order samples are taken in: `count` rounds of every contestant, each round
    starting one contestant later, so none always follows the same other one."""
    order = []
    for round_index in range(count):
        shift = round_index % len(contestants)
        order += [(round_index, name) for name in contestants[shift:] + contestants[:shift]]
    return order
