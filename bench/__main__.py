"""``python -m bench [suite ...]``: run the benchmark suites (all by default);
``python -m bench profile [steps]``: where a compiled GPT training step spends its time;
``python -m bench cuda_profile [gpt2|cnn|lstm ...]``: where CUDA steps spend GPU time."""

from __future__ import annotations

import importlib
import sys

SUITES = ["ops", "train", "compile", "compile_train", "cuda", "gpt2", "flex", "dist_cpu"]


def main(argv=None) -> None:
    names = (argv if argv is not None else sys.argv[1:]) or SUITES
    if names[0] == "profile":
        importlib.import_module("bench.profile").main(names[1:])
        return
    if names[0] == "cuda_profile":
        importlib.import_module("bench.cuda_profile").main(names[1:])
        return
    for name in names:
        if name not in SUITES:
            raise SystemExit(f"unknown suite {name!r}; choose from {', '.join(SUITES)}")
        importlib.import_module(f"bench.{name}").main()


if __name__ == "__main__":
    main()
