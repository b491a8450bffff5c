"""``python -m models <name> <out.onnx> [--input-size N] [--num-classes N] [--in-channels N] [--batch N] [--seed N]``:
write a zoo model and say what was written. An option left out keeps the builder's default; an option the builder
does not take (the streaming GRU has no batch) is refused by name."""

from __future__ import annotations

import argparse
import inspect
import os
from collections.abc import Sequence

from . import SEQUENCE, TASKS, ZOO, build, save

BUILDERS = ZOO | TASKS | SEQUENCE


def _batch(text: str) -> int | None:
    return None if text == "N" else int(text)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv``, write the requested model and print its path and size."""
    parser = argparse.ArgumentParser(prog="python -m models", description="Write a model-zoo ONNX file.",
                                     argument_default=argparse.SUPPRESS)
    parser.add_argument("name", choices=list(BUILDERS))
    parser.add_argument("output")
    parser.add_argument("--input-size", type=int)
    parser.add_argument("--num-classes", type=int)
    parser.add_argument("--in-channels", type=int)
    parser.add_argument("--batch", type=_batch, help='batch size, or "N" for a symbolic batch (default: 1)')
    parser.add_argument("--seed", type=int)
    args = vars(parser.parse_args(argv))
    name, output = args.pop("name"), args.pop("output")
    takes = inspect.signature(BUILDERS[name]).parameters
    for option in args:
        if option not in takes:
            parser.error(f"{name} does not take --{option.replace('_', '-')}")
    save(build(name, **args), output)
    print(f"wrote {output} ({name}, {os.path.getsize(output):,} bytes)")


if __name__ == "__main__":
    main()
