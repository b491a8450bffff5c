"""Comparison, logic, selection, rounding, index and scatter builtins against LiteRT: one small `.tflite` per
builtin (or option), built with the schema's builders; float outputs within 1e-4 of the output range, integer and
bool outputs exact."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from tests.tflite_models import Feed, check, litert_interpreter, rand, single

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
litert_interpreter()

RNG = np.random.default_rng(3)
I32, B = np.int32, np.bool_


def ints(*shape: int, low: int = -5, high: int = 6) -> np.ndarray:
    return RNG.integers(low, high, shape).astype(I32)


def bools(*shape: int) -> np.ndarray:
    return RNG.random(shape) < 0.5


def grid(*shape: int) -> np.ndarray:
    """Floats on a coarse grid, so that comparisons see ties."""
    return (RNG.integers(-3, 4, shape) * 0.5).astype(np.float32)


def unary(op: str, x: np.ndarray, options: str | None = None, out: type = np.float32, **fields):
    return single(op, [Feed(x)], 1, options, out_dtypes=(out,), **fields)


def binary(op: str, a: np.ndarray, b: np.ndarray, out: type = np.float32, options: str | None = None):
    return single(op, [Feed(a), Feed(b)], 1, options, out_dtypes=(out,))


CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {
    "not_equal": lambda: binary("NOT_EQUAL", grid(2, 3, 4), grid(3, 1), B),
    "not_equal_int": lambda: binary("NOT_EQUAL", ints(2, 5), ints(5), B),
    "logical_and": lambda: binary("LOGICAL_AND", bools(2, 3), bools(2, 3), B),
    "logical_or": lambda: binary("LOGICAL_OR", bools(2, 3), bools(3), B),
    "logical_not": lambda: unary("LOGICAL_NOT", bools(2, 3), out=B),
    "bitwise_xor": lambda: binary("BITWISE_XOR", ints(2, 3, low=-100, high=100), ints(2, 3, low=-100, high=100), I32),
    "right_shift_signed": lambda: binary("RIGHT_SHIFT", ints(3, 4, low=-300, high=300),
                                         np.array([0, 1, 3, 7], I32), I32),
    "right_shift_unsigned": lambda: binary("RIGHT_SHIFT", RNG.integers(0, 255, (3, 4)).astype(np.uint8),
                                           np.array([0, 1, 3, 7], np.uint8), np.uint8),
    "select_v2_broadcast": lambda: single("SELECT_V2", [Feed(bools(3, 1)), (3, 4), (4,)], 1, "SelectV2Options"),
    "select_same_shape": lambda: single("SELECT", [Feed(bools(2, 3)), (2, 3), (2, 3)], 1, "SelectOptions"),
    "select_rows": lambda: single("SELECT", [Feed(bools(3)), (3, 2, 2), (3, 2, 2)], 1, "SelectOptions"),
    "floor": lambda: unary("FLOOR", rand(3, 4) * 5),
    "ceil": lambda: unary("CEIL", rand(3, 4) * 5),
    "round_half_to_even": lambda: unary("ROUND", np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7], np.float32)),
    "sin": lambda: unary("SIN", rand(3, 4) * 4),
    "cos": lambda: unary("COS", rand(3, 4) * 4),
    "sign": lambda: unary("SIGN", grid(3, 4)),
    "floor_div": lambda: binary("FLOOR_DIV", rand(3, 4) * 5, np.array([1.5, -2.0, 0.7, -0.3], np.float32)),
    "floor_div_int": lambda: binary("FLOOR_DIV", ints(3, 4, low=-20, high=20), np.array([3, -4, 5, -2], I32), I32),
    "floor_mod": lambda: binary("FLOOR_MOD", rand(3, 4) * 5, np.array([1.5, -2.0, 0.7, -0.3], np.float32)),
    "floor_mod_int": lambda: binary("FLOOR_MOD", ints(3, 4, low=-20, high=20), np.array([3, -4, 5, -2], I32), I32),
    "atan2": lambda: binary("ATAN2", np.array([1, -1, 0, 0, 2, -2, 0.5, 0], np.float32),
                            np.array([-1, -1, -1, 1, 0, 0, 3, 0], np.float32)),
    "fake_quant": lambda: single("FAKE_QUANT", [(3, 20)], 1, "FakeQuantOptions", Min=-0.7, Max=0.9, NumBits=8),
    "fake_quant_4_bit": lambda: single("FAKE_QUANT", [(3, 20)], 1, "FakeQuantOptions", Min=-0.3, Max=0.55,
                                       NumBits=4),
    "cumsum": lambda: single("CUMSUM", [(2, 5, 3), np.array(1, I32)], 1, "CumsumOptions"),
    "cumsum_exclusive_reverse": lambda: single("CUMSUM", [(2, 5, 3), np.array(-1, I32)], 1, "CumsumOptions",
                                               Exclusive=True, Reverse=True),
    "add_n": lambda: single("ADD_N", [(2, 3), (2, 3), (2, 3)], 1, "AddNOptions"),
    "reduce_any": lambda: single("REDUCE_ANY", [Feed(bools(2, 3, 4)), np.array([1], I32)], 1, "ReducerOptions",
                                 out_dtypes=(B,)),
    "reduce_all_keep_dims": lambda: single("REDUCE_ALL", [Feed(RNG.random((2, 3, 4)) < 0.8), np.array([0, 2], I32)],
                                           1, "ReducerOptions", out_dtypes=(B,), KeepDims=True),
    "bucketize": lambda: unary("BUCKETIZE", grid(3, 5), "BucketizeOptions", I32,
                               Boundaries=np.array([-1.0, 0.0, 0.5, 2.0], np.float32)),
    "bucketize_int": lambda: unary("BUCKETIZE", ints(3, 5), "BucketizeOptions", I32,
                                   Boundaries=np.array([-1.5, 0.0, 0.5, 2.0], np.float32)),
    "broadcast_to": lambda: single("BROADCAST_TO", [(3, 1), np.array([2, 3, 4], I32)], 1, "BroadcastToOptions",
                                      version=2),
    "space_to_batch_nd": lambda: single("SPACE_TO_BATCH_ND", [(2, 5, 6, 3), np.array([2, 3], I32),
                                                              np.array([[1, 0], [2, 1]], I32)], 1,
                                        "SpaceToBatchNDOptions"),
    "batch_to_space_nd": lambda: single("BATCH_TO_SPACE_ND", [(12, 3, 3, 2), np.array([2, 3], I32),
                                                              np.array([[1, 0], [2, 1]], I32)], 1,
                                        "BatchToSpaceNDOptions"),
    "space_to_batch_nd_1d": lambda: single("SPACE_TO_BATCH_ND", [(1, 7, 2), np.array([3], I32),
                                                                 np.array([[1, 1]], I32)], 1, "SpaceToBatchNDOptions"),
    "reverse_v2": lambda: single("REVERSE_V2", [(2, 3, 4), np.array([1, 2], I32)], 1, "ReverseV2Options"),
    "reverse_v2_one_axis": lambda: single("REVERSE_V2", [(2, 3, 4), np.array([-3], I32)], 1, "ReverseV2Options"),
    "reverse_sequence": lambda: single("REVERSE_SEQUENCE", [(3, 5, 2), np.array([5, 2, 0], I32)], 1,
                                       "ReverseSequenceOptions", SeqDim=1, BatchDim=0),
    "gather_nd": lambda: single("GATHER_ND", [(4, 3, 2), np.array([[3, 1], [0, 2], [3, 1]], I32)], 1,
                                "GatherNdOptions"),
    "embedding_lookup": lambda: single("EMBEDDING_LOOKUP", [Feed(np.array([3, 0, 3, 1], I32)), rand(5, 4)], 1),
    "one_hot": lambda: single("ONE_HOT", [Feed(np.array([[0, 3], [2, -1]], I32)), np.array(4, I32),
                                          np.array(2.0, np.float32), np.array(-1.0, np.float32)], 1,
                              "OneHotOptions", Axis=-1),
    "one_hot_axis0": lambda: single("ONE_HOT", [Feed(np.array([1, 0, 2], I32)), np.array(3, I32),
                                                np.array(1.0, np.float32), np.array(0.0, np.float32)], 1,
                                    "OneHotOptions", Axis=0),
    "where": lambda: single("WHERE", [Feed(bools(3, 4))], 1, "WhereOptions", out_dtypes=(np.int64,)),
    "unique": lambda: single("UNIQUE", [Feed(np.array([3, 1, 3, 7, 1, 0, 7], I32))], 2, "UniqueOptions",
                             out_dtypes=(I32, I32), IdxOutType=2),
    "scatter_nd_sums_repeats": lambda: single("SCATTER_ND", [np.array([[1], [3], [1]], I32), (3, 4),
                                                             np.array([5, 4], I32)], 1, "ScatterNdOptions"),
    "sparse_to_dense": lambda: single("SPARSE_TO_DENSE", [np.array([[0, 1], [2, 3]], I32), np.array([3, 4], I32),
                                                          Feed(np.array([7.0, -2.0], np.float32)),
                                                          np.array(0.5, np.float32)], 1, "SparseToDenseOptions"),
    "unsorted_segment_sum": lambda: single("UNSORTED_SEGMENT_SUM", [(5, 3), np.array([2, 0, 2, 1, 0], I32),
                                                                    np.array(4, I32)], 1, "UnsortedSegmentSumOptions"),
    "unsorted_segment_max": lambda: single("UNSORTED_SEGMENT_MAX", [(5, 3), np.array([2, 0, 2, 1, 0], I32),
                                                                    np.array(4, I32)], 1, "UnsortedSegmentMaxOptions"),
    "unsorted_segment_min": lambda: single("UNSORTED_SEGMENT_MIN", [(5, 3), np.array([2, 0, 2, 1, 0], I32),
                                                                    np.array(3, I32)], 1, "UnsortedSegmentMinOptions"),
    "unsorted_segment_prod": lambda: single("UNSORTED_SEGMENT_PROD", [(5, 3), np.array([2, 0, 2, 1, 0], I32),
                                                                      np.array(4, I32)], 1,
                                            "UnsortedSegmentProdOptions"),
    "segment_sum": lambda: single("SEGMENT_SUM", [(6, 2), np.array([0, 0, 1, 2, 2, 2], I32)], 1,
                                  "SegmentSumOptions"),
    "bitcast": lambda: single("BITCAST", [(2, 3)], 1, "BitcastOptions", out_dtypes=(I32,)),
    "matrix_diag": lambda: single("MATRIX_DIAG", [(2, 4)], 1, "MatrixDiagOptions"),
    "matrix_set_diag_wide": lambda: single("MATRIX_SET_DIAG", [(2, 3, 5), (2, 3)], 1, "MatrixSetDiagOptions"),
    "matrix_set_diag_tall": lambda: single("MATRIX_SET_DIAG", [(5, 3), (3,)], 1, "MatrixSetDiagOptions"),
    "mirror_pad_symmetric": lambda: single("MIRROR_PAD", [(1, 4, 5, 2), np.array([[0, 0], [2, 4], [3, 1], [0, 0]],
                                                                                  I32)], 1, "MirrorPadOptions", Mode=1),
    "gather_batch_dims": lambda: single("GATHER", [(2, 5, 3), Feed(np.array([[4, 0, 4], [1, 2, 3]], I32))], 1,
                                        "GatherOptions", Axis=1, BatchDims=1),
    "gather_batch_dims_inner_axis": lambda: single("GATHER", [(2, 3, 5, 4), Feed(np.array([[4, 0], [1, 3]], I32))],
                                                   1, "GatherOptions", Axis=2, BatchDims=1),
    "dynamic_update_slice": lambda: single("DYNAMIC_UPDATE_SLICE", [(4, 6, 3), (2, 3, 3),
                                                                    Feed(np.array([1, 2, 0], I32))], 1),
    "dynamic_update_slice_clamped": lambda: single("DYNAMIC_UPDATE_SLICE", [(4, 6), (2, 3),
                                                                            Feed(np.array([3, -2], I32))], 1),
    "fill": lambda: single("FILL", [np.array([2, 3], I32), Feed(np.array(1.5, np.float32))], 1, "FillOptions"),
    "zeros_like": lambda: single("ZEROS_LIKE", [(2, 3)], 1, "ZerosLikeOptions"),
    "range": lambda: single("RANGE", [np.array(1, I32), Feed(np.array(10, I32)), np.array(3, I32)], 1,
                            "RangeOptions", out_dtypes=(I32,)),
    "rank": lambda: single("RANK", [(2, 3, 4)], 1, "RankOptions", out_dtypes=(I32,)),
    "broadcast_args": lambda: single("BROADCAST_ARGS", [np.array([2, 1, 4], I32), np.array([3, 1], I32)], 1,
                                   out_dtypes=(I32,)),
}
for _op in ("EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
    CASES[_op.lower()] = (lambda op: lambda: binary(op, grid(2, 3, 4), grid(4), B))(_op)


@pytest.mark.parametrize("case", sorted(CASES))
def test_builtin_matches_litert(case):
    data, feeds = CASES[case]()
    check(data, feeds)


def nms_model(version: int, max_output: int = 6, sigma: float = 0.0) -> tuple[bytes, list[np.ndarray]]:
    """NON_MAX_SUPPRESSION_V4 / V5 over 12 random boxes in corner form (some with swapped corners)."""
    from tests.tflite_models import TFLiteModel
    m = TFLiteModel()
    corners = RNG.uniform(0, 1, (12, 2, 2)).astype(np.float32)
    corners[:, 1] = corners[:, 0] + RNG.uniform(0.1, 0.5, (12, 2)) * np.where(np.arange(12) % 3 == 0, -1, 1)[:, None]
    boxes, scores = corners.reshape(12, 4), RNG.uniform(0, 1, 12).astype(np.float32)
    b, s = m.tensor([12, 4], name="boxes"), m.tensor([12], name="scores")
    ins = [b, s, m.const(np.array(max_output, I32)), m.const(np.array(0.3, np.float32)),
           m.const(np.array(0.2, np.float32))]
    outs = [m.tensor([max_output], I32, name="selected")]
    if version == 5:
        ins.append(m.const(np.array(sigma, np.float32)))
        outs.append(m.tensor([max_output], name="selected_scores"))
    outs.append(m.tensor([], I32, name="valid"))
    m.op(f"NON_MAX_SUPPRESSION_V{version}", ins, outs)
    return m.build([b, s], outs), [boxes, scores]


@pytest.mark.parametrize("version,max_output", [(4, 6), (4, 12), (5, 5)])
def test_non_max_suppression_matches_litert(version, max_output):
    data, feeds = nms_model(version, max_output)
    check(data, feeds)


def test_soft_non_max_suppression_is_refused():
    import lite
    from converter import convert_tflite
    with pytest.raises(lite.LiteError, match="soft_nms_sigma") as info:
        convert_tflite(nms_model(5, sigma=0.5)[0])
    assert info.value.status == lite.RET_NOT_SUPPORT


def test_hybrid_embedding_lookup_dequantizes_the_int8_table():
    """A text model's int8 embedding table (per-tensor scale) under float outputs: LiteRT's hybrid kernel
    dequantizes the looked-up rows; we gather from the table dequantized at conversion."""
    from tests.tflite_models import TFLiteModel
    m = TFLiteModel()
    ids, out = m.tensor([4], I32, name="ids"), m.tensor([4, 6], name="rows")
    table = m.const(RNG.integers(-127, 128, (7, 6)).astype(np.int8), scale=np.array([0.02], np.float32),
                    zero_point=np.zeros(1, np.int64))
    m.op("EMBEDDING_LOOKUP", [ids, table], [out])
    check(m.build([ids], [out]), [np.array([6, 0, 3, 6], I32)])
