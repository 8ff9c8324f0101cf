"""``python -m bench [suite ...]``: run the benchmark suites (all by default)."""

from __future__ import annotations

import importlib
import sys

SUITES = ["ops", "train", "compile", "compile_train"]


def main(argv=None) -> None:
    names = (argv if argv is not None else sys.argv[1:]) or SUITES
    for name in names:
        if name not in SUITES:
            raise SystemExit(f"unknown suite {name!r}; choose from {', '.join(SUITES)}")
        importlib.import_module(f"bench.{name}").main()


if __name__ == "__main__":
    main()
