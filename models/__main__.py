"""``python -m models <name> <out.onnx> [--input-size N] [--num-classes N] [--batch N]``: write a zoo model."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import SEQUENCE, TASKS, ZOO, build, save


def _batch(text: str) -> int | None:
    return None if text == "N" else int(text)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` and write the requested model; unset options keep the builder's defaults."""
    parser = argparse.ArgumentParser(prog="python -m models", description="Write a model-zoo ONNX file.")
    parser.add_argument("name", choices=[*ZOO, *TASKS, *SEQUENCE])
    parser.add_argument("output")
    parser.add_argument("--input-size", type=int)
    parser.add_argument("--num-classes", type=int)
    parser.add_argument("--in-channels", type=int)
    parser.add_argument("--batch", type=_batch, default=1, help='batch size, or "N" for a symbolic batch')
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = ("input_size", "num_classes", "in_channels")
    options = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    save(build(args.name, batch=args.batch, seed=args.seed, **options), args.output)


if __name__ == "__main__":
    main()
