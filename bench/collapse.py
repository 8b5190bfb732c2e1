"""Where a py-spy profile (``--format raw``: collapsed stacks) spends its samples.

    uv run python bench/collapse.py var/bench/review_api-profile-first_calls.txt [--top 30]
        [--match orbit_console]

Prints the functions holding the most samples inclusively (anywhere on the stack) and by
self time (at the top of the stack), as shares of all samples.
"""

import argparse
import collections
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default="", help="only frames whose text contains this")
    args = parser.parse_args()
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in args.path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            if args.match in frame:
                inclusive[frame] += count
    if not total:
        sys.exit("no samples")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"\n{title} ({total} samples)")
        for frame, count in counter.most_common(args.top):
            print(f"{100 * count / total:6.1f} %  {frame[:150]}")


if __name__ == "__main__":
    main()
