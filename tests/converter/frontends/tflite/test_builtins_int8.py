"""Quantized (int8) variants of single builtins against LiteRT's int8 kernels. Data movement (broadcast, space /
batch, reverse, gather, tile, pads, depth / space, top-k, select, min / max) keeps the input's scale and zero
point, so it is exact; comparisons and ARG_MAX compare the reals exactly; ops computed in float between a
dequantize and a quantize (SQUARED_DIFFERENCE, RSQRT, L2_NORMALIZATION, LOG_SOFTMAX, SUM, MEAN, ABS, NEG) and GELU
(our int8 lookup table) land
within one quantum of LiteRT's integer arithmetic (on these inputs every value is equal)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from tests.tflite_models import Feed, check, litert_interpreter, single

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
litert_interpreter()

RNG = np.random.default_rng(11)
I8, I32, B = np.int8, np.int32, np.bool_
S, Z = 0.05, -3                      # the inputs' scale and zero point
SAME = ((S, Z),)


def q(*shape: int, low: int = -128, high: int = 128) -> Feed:
    return Feed(RNG.integers(low, high, shape).astype(I8), S, Z)


def moved(op: str, inputs: list, options: str | None = None, **fields):
    """An int8 builtin whose output keeps the input's params."""
    return single(op, inputs, 1, options, out_dtypes=(I8,), out_quant=SAME, **fields)


def computed(op: str, inputs: list, out: tuple[float, int], options: str | None = None, **fields):
    return single(op, inputs, 1, options, out_dtypes=(I8,), out_quant=(out,), **fields)


EXACT: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {
    "equal": lambda: single("EQUAL", [q(2, 3, 4), q(4, low=-4, high=4)], 1, out_dtypes=(B,)),
    "not_equal": lambda: single("NOT_EQUAL", [q(2, 3, 4, low=-3, high=3), q(3, 4, low=-3, high=3)], 1,
                                out_dtypes=(B,)),
    "less": lambda: single("LESS", [q(2, 3, 4), q(2, 3, 4)], 1, out_dtypes=(B,)),
    "greater_equal": lambda: single("GREATER_EQUAL", [q(2, 3, 4), q(4)], 1, out_dtypes=(B,)),
    "select_v2": lambda: moved("SELECT_V2", [Feed(RNG.random((3, 1)) < 0.5), q(3, 4), q(4)], "SelectV2Options"),
    "select_rows": lambda: moved("SELECT", [Feed(RNG.random(3) < 0.5), q(3, 2, 4), q(3, 2, 4)], "SelectOptions"),
    "broadcast_to": lambda: moved("BROADCAST_TO", [q(3, 1), np.array([2, 3, 4], I32)], "BroadcastToOptions",
                                  version=2),
    "space_to_batch_nd": lambda: moved("SPACE_TO_BATCH_ND", [q(1, 5, 4, 3), np.array([2, 2], I32),
                                                             np.array([[1, 0], [0, 0]], I32)],
                                       "SpaceToBatchNDOptions"),
    "batch_to_space_nd": lambda: moved("BATCH_TO_SPACE_ND", [q(4, 3, 2, 3), np.array([2, 2], I32),
                                                             np.array([[1, 0], [0, 1]], I32)],
                                       "BatchToSpaceNDOptions"),
    "reverse_v2": lambda: moved("REVERSE_V2", [q(2, 3, 4), np.array([1], I32)], "ReverseV2Options"),
    "gather_nd": lambda: moved("GATHER_ND", [q(4, 3, 2), np.array([[3, 1], [0, 2]], I32)], "GatherNdOptions"),
    "tile": lambda: moved("TILE", [q(2, 3), np.array([2, 2], I32)]),
    "mirror_pad": lambda: moved("MIRROR_PAD", [q(1, 4, 4, 2), np.array([[0, 0], [1, 2], [2, 1], [0, 0]], I32)],
                                "MirrorPadOptions", Mode=0),
    "depth_to_space": lambda: moved("DEPTH_TO_SPACE", [q(1, 2, 3, 8)], "DepthToSpaceOptions", BlockSize=2),
    "space_to_depth": lambda: moved("SPACE_TO_DEPTH", [q(1, 4, 6, 2)], "SpaceToDepthOptions", BlockSize=2),
    "maximum": lambda: moved("MAXIMUM", [q(2, 3), q(3)]),
    "minimum": lambda: moved("MINIMUM", [q(2, 3), q(2, 3)]),
    "arg_max": lambda: single("ARG_MAX", [q(3, 7), np.array([1], I32)], 1, "ArgMaxOptions", out_dtypes=(I32,),
                              OutputType=2),
    "top_k": lambda: single("TOPK_V2", [q(3, 9), np.array(4, I32)], 2, out_dtypes=(I8, I32), out_quant=SAME),
}
ONE_QUANTUM: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {
    "squared_difference": lambda: computed("SQUARED_DIFFERENCE", [q(2, 8), q(2, 8)], (0.2, -128)),
    "rsqrt": lambda: computed("RSQRT", [q(2, 8, low=10, high=128)], (0.01, -128)),
    "l2_normalization": lambda: computed("L2_NORMALIZATION", [q(2, 3, 8)], (1 / 128, 0), "L2NormOptions"),
    "log_softmax": lambda: computed("LOG_SOFTMAX", [q(3, 10)], (16 / 256, 127), "LogSoftmaxOptions"),
    "sum": lambda: computed("SUM", [q(2, 4, 3), np.array([1], I32)], (0.15, 0), "ReducerOptions"),
    "mean": lambda: computed("MEAN", [q(2, 4, 4, 3), np.array([1, 2], I32)], (0.03, 2), "ReducerOptions"),
    "gelu": lambda: computed("GELU", [q(3, 20)], (0.03, -120), "GeluOptions"),
    "gelu_tanh": lambda: computed("GELU", [q(3, 20)], (0.03, -120), "GeluOptions", Approximate=True),
    "abs": lambda: computed("ABS", [q(3, 5)], (0.03, -128)),
    "neg": lambda: computed("NEG", [q(3, 5)], (0.05, 3)),
}


@pytest.mark.parametrize("case", sorted(EXACT))
def test_int8_builtin_is_exact(case):
    data, feeds = EXACT[case]()
    check(data, feeds)


@pytest.mark.parametrize("case", sorted(ONE_QUANTUM))
def test_int8_builtin_within_one_quantum(case):
    data, feeds = ONE_QUANTUM[case]()
    check(data, feeds, quantum=1)
