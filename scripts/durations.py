"""Per-file test time from a pytest junit report, slowest first.

    pytest --junitxml=report.xml ...
    python scripts/durations.py report.xml [--top 30] [--markdown]

Prints, per test file: the tests, the sum of their times (setup, call and
teardown, as junit records them), and that sum's share of the whole; then the
totals. Under pytest-xdist the sum is work, not wall time: the processes run
side by side.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def per_file(report: str) -> dict[str, tuple[int, float]]:
    """{file: (tests, seconds)} from a junit report."""
    found: dict[str, list[float]] = defaultdict(list)
    for case in ET.parse(report).getroot().iter("testcase"):
        classname = case.get("classname", "")
        parts = classname.split(".")
        # "tests.chaos.test_mutants" or "tests.test_x.TestClass": up to the test_ module.
        module = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        path = "/".join(parts[: module + 1]) + ".py"
        found[path].append(float(case.get("time", "0") or 0))
    return {path: (len(times), sum(times)) for path, times in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--top", type=int, default=0, help="only the slowest N files")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args(argv)
    files = sorted(per_file(args.report).items(), key=lambda kv: -kv[1][1])
    tests = sum(n for _, (n, _) in files)
    total = sum(t for _, (_, t) in files)
    shown = files[: args.top] if args.top else files
    if args.markdown:
        print("| file | tests | seconds | share |\n|---|---:|---:|---:|")
        for path, (n, t) in shown:
            print(f"| {path} | {n} | {t:.1f} | {t / total:.1%} |")
        print(f"| all {len(files)} files | {tests} | {total:.1f} | 100% |")
    else:
        for path, (n, t) in shown:
            print(f"{t:8.1f} s {t / total:6.1%} {n:6d}  {path}")
        print(f"{total:8.1f} s  100.0% {tests:6d}  all {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
