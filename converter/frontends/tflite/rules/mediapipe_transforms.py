"""TFLite importer rules for MediaPipe's landmark transform ops (version 2, as face_landmark_with_attention uses
them), all onto existing ops. LiteRT has no kernel for them; MediaPipe's own InferenceCalculator runs them, and
that is the reference they are checked against (docs/tflite.md).

- `Landmarks2TransformMatrix` (landmarks [1, N, 3] -> [1, 4, 4]): the region of a landmark subset, upright. The
  rotation r = target - atan2 of the (left -> right) landmark vector; the subset's (x, y) rotated by r give an
  axis-aligned box (size w, h, centre c rotated back by -r); the matrix maps crop pixel (u, v) to
  shift(c) . rotate(-r) . scale(scale_x * w / out_w, scale_y * h / out_h) . shift(-out_w / 2, -out_h / 2).
- `TransformTensorBilinear` (x [1, H, W, C], matrix [1, 4, 4] -> [1, out_h, out_w, C]): output pixel (u, v) reads x
  bilinearly at (x, y) = rows 0 and 1 of the matrix applied to (u + 0.5, v + 0.5, 0, 1), less 0.5 (pixel
  centres); a point outside [0, W - 1] x [0, H - 1] reads 0.
- `TransformLandmarks` (landmarks [1, N, 2 or 3], matrix [1, 4, 4]): (x, y) mapped by the matrix's rows 0 and 1,
  z kept.

The options are a FlexBuffers map in the operator's custom options. The matrices are built from scalars by
products with constant matrices (no scalar assembly op needed); the rotation's cosine and sine come from the
landmark vector's direction rather than through atan2 (coincident landmarks: direction (1, 0), as atan2(0, 0) = 0).
"""
from __future__ import annotations

import numpy as np
from flatbuffers import flexbuffers

from converter.frontends.tflite.registry import ImportContext, tflite_op
from lite.dtypes import DataType
from schema import fb

F32 = np.float32
MATRIX_FIELDS = ("left_rotation_idx", "right_rotation_idx", "subset_idxs", "output_width", "output_height",
                 "scale_x", "scale_y")


def options(ctx: ImportContext, required: tuple[str, ...]) -> dict:
    """The FlexBuffers map of the custom options, with every `required` key."""
    try:
        found = flexbuffers.Loads(bytes(ctx.op.custom_options)) if len(ctx.op.custom_options) else {}
    except (ValueError, IndexError, TypeError, KeyError, UnicodeDecodeError) as e:
        raise ctx.error(f"custom options are not a FlexBuffers map: {e}") from None
    if not isinstance(found, dict) or any(k not in found for k in required):
        raise ctx.error(f"custom options must hold {', '.join(required)}; found "
                        f"{sorted(found) if isinstance(found, dict) else found!r}")
    return found


def _const(ctx: ImportContext, array: np.ndarray | list, hint: str) -> str:
    return ctx.add_const(np.asarray(array, F32), hint)


def _index(ctx: ImportContext, values: list[int], hint: str) -> str:
    return ctx.add_const(np.asarray(values, np.int64), hint)


def _matmul(ctx: ImportContext, a: str, b: np.ndarray, hint: str) -> str:
    return ctx.emit1("MatMul", [a, _const(ctx, b, hint)], transpose_a=False, transpose_b=False)


def _reduce(ctx: ImportContext, x: str, mode: int) -> str:
    return ctx.emit1("Reduce", [x, _index(ctx, [0], "axes")], mode=mode, keep_dims=True, noop_with_empty_axes=True)


@tflite_op("CUSTOM:Landmarks2TransformMatrix")
def landmarks_to_transform_matrix(ctx: ImportContext) -> None:
    p = options(ctx, MATRIX_FIELDS)
    landmarks = ctx.input(0)
    n = ctx.value(landmarks).shape[1]
    subset = [int(i) for i in p["subset_idxs"]]
    picked = [int(p["left_rotation_idx"]), int(p["right_rotation_idx"]), *subset]
    if not subset or any(not 0 <= i < n for i in picked):
        raise ctx.error(f"landmark indices must lie in [0, {n}) and the subset must not be empty")
    out_w, out_h = float(p["output_width"]), float(p["output_height"])
    target = float(p.get("target_rotation_radians", 0))
    if out_w <= 0 or out_h <= 0 or float(p["scale_x"]) <= 0 or float(p["scale_y"]) <= 0:
        raise ctx.error("output_width, output_height, scale_x and scale_y must be positive")
    xy = ctx.emit1("Slice", [ctx.emit1("Reshape", [landmarks, _index(ctx, [n, 3], "shape")]),
                             _index(ctx, [0, 0], "starts"), _index(ctx, [n, 2], "ends")])          # [N, 2]
    left, right = (ctx.emit1("Gather", [xy, _index(ctx, [i], "end")], axis=0) for i in picked[:2])   # [1, 2]
    d = ctx.emit1("Sub", [right, left])                                                            # (dx, dy)
    length = ctx.emit1("Sqrt", [_reduce_sum(ctx, ctx.emit1("Mul", [d, d]))])
    same = ctx.emit1("Cast", [ctx.emit1("Compare", [length, _const(ctx, 0, "zero")], mode=fb.CompareMode.EQUAL)],
                     to=DataType.FLOAT32)      # coincident landmarks: atan2(0, 0) = 0, the direction (1, 0)
    direction = ctx.emit1("Div", [ctx.emit1("Add", [d, ctx.emit1("Mul", [same, _const(ctx, [[1, 0]], "x_axis")])]),
                                  ctx.emit1("Add", [length, same])])                             # (cos t, sin t)
    ct, st = np.cos(target), np.sin(target)
    cs = _matmul(ctx, direction, np.array([[ct, st], [st, -ct]], F32), "rotation")                 # (cos r, sin r)
    rotate = ctx.emit1("Reshape", [_matmul(ctx, cs, np.array([[1, 0, 0, 1], [0, 1, -1, 0]], F32), "rotate"),
                                   _index(ctx, [2, 2], "shape")])          # rows (x, y) -> rotated by r: R(r)^T
    points = ctx.emit1("MatMul", [ctx.emit1("Gather", [xy, _index(ctx, subset, "subset")], axis=0), rotate],
                       transpose_a=False, transpose_b=False)                                       # [K, 2]
    low, high = _reduce(ctx, points, fb.ReduceMode.MIN), _reduce(ctx, points, fb.ReduceMode.MAX)   # [1, 2]
    middle = ctx.emit1("Mul", [ctx.emit1("Add", [low, high]), _const(ctx, 0.5, "half")])
    unrotate = ctx.emit1("Reshape", [_matmul(ctx, cs, np.array([[1, 0, 0, 1], [0, -1, 1, 0]], F32), "unrotate"),
                                     _index(ctx, [2, 2], "shape")])        # rows -> rotated by -r: R(r)
    centre = ctx.emit1("MatMul", [middle, unrotate], transpose_a=False, transpose_b=False)        # [1, 2]
    scales = ctx.emit1("Mul", [ctx.emit1("Sub", [high, low]),
                               _const(ctx, [[float(p["scale_x"]) / out_w, float(p["scale_y"]) / out_h]], "scale")])
    # B = R(-r) . diag(scales), row-major (c a, s b, -s a, c b)
    block = ctx.emit1("Mul", [_matmul(ctx, cs, np.array([[1, 0, 0, 1], [0, 1, -1, 0]], F32), "rotate_back"),
                              _matmul(ctx, scales, np.array([[1, 0, 1, 0], [0, 1, 0, 1]], F32), "spread")])
    half = [-out_w / 2, -out_h / 2]
    shift = ctx.emit1("Add", [centre, _matmul(ctx, block, np.array([[half[0], 0], [half[1], 0], [0, half[0]],
                                                                     [0, half[1]]], F32), "shift")])   # [1, 2]
    place_block, place_shift, fixed = np.zeros((4, 16), F32), np.zeros((2, 16), F32), np.zeros((1, 16), F32)
    place_block[[0, 1, 2, 3], [0, 1, 4, 5]] = 1
    place_shift[[0, 1], [3, 7]] = 1
    fixed[0, [10, 15]] = 1
    flat = ctx.emit1("Add", [ctx.emit1("Add", [_matmul(ctx, block, place_block, "place"),
                                               _matmul(ctx, shift, place_shift, "place")]),
                             _const(ctx, fixed, "identity_rows")])
    ctx.emit("Reshape", [flat, _index(ctx, [1, 4, 4], "shape")], ctx.outputs)


def _reduce_sum(ctx: ImportContext, x: str) -> str:
    return ctx.emit1("Reduce", [x, _index(ctx, [1], "axes")], mode=fb.ReduceMode.SUM, keep_dims=True,
                     noop_with_empty_axes=True)


def _affine_rows(ctx: ImportContext, matrix: str) -> str:
    """[3, 2]: rows 0 and 1 of the 4x4 matrix without the z column, transposed, so (x, y, 1) @ it = (x', y')."""
    rows = ctx.emit1("Gather", [ctx.emit1("Reshape", [matrix, _index(ctx, [16], "shape")]),
                                _index(ctx, [0, 4, 1, 5, 3, 7], "affine")], axis=0)
    return ctx.emit1("Reshape", [rows, _index(ctx, [3, 2], "shape")])


@tflite_op("CUSTOM:TransformTensorBilinear")
def transform_tensor_bilinear(ctx: ImportContext) -> None:
    p = options(ctx, ("output_width", "output_height"))
    out_w, out_h = int(p["output_width"]), int(p["output_height"])
    x, matrix = ctx.input(0), ctx.input(1)
    shape = ctx.value(x).shape
    if len(shape) != 4 or shape[0] != 1 or out_w <= 0 or out_h <= 0:
        raise ctx.error(f"input must be [1, H, W, C] and the output size positive, got {list(shape)}, "
                        f"{out_h}x{out_w}")
    _, h, w, _ = shape
    v, u = np.meshgrid(np.arange(out_h, dtype=F32), np.arange(out_w, dtype=F32), indexing="ij")
    pixels = np.stack([u.ravel() + 0.5, v.ravel() + 0.5, np.ones(u.size, F32)], axis=1)          # [P, 3]
    at = ctx.emit1("Sub", [ctx.emit1("MatMul", [_const(ctx, pixels, "pixels"), _affine_rows(ctx, matrix)],
                                     transpose_a=False, transpose_b=False), _const(ctx, 0.5, "half")])  # [P, 2]
    size = np.array([w - 1, h - 1], F32)
    grid = ctx.emit1("Sub", [ctx.emit1("Mul", [at, _const(ctx, 2 / np.maximum(size, 1), "normalise")]),
                             _const(ctx, 1, "one")])
    sampled = ctx.emit1("GridSample", [x, ctx.emit1("Reshape", [grid, _index(ctx, [1, out_h, out_w, 2], "shape")])],
                        mode=fb.ResizeMode.LINEAR, padding_mode=fb.PaddingFill.CONSTANT, align_corners=True)
    inside = [ctx.emit1("Cast", [ctx.emit1("Compare", [at, _const(ctx, bound, "bound")], mode=mode)],
                        to=DataType.FLOAT32)
              for bound, mode in ((np.zeros(2, F32), fb.CompareMode.GREATER_EQUAL),
                                  (size, fb.CompareMode.LESS_EQUAL))]
    both = ctx.emit1("Mul", inside)                                                                 # [P, 2]
    mask = _reduce(ctx, ctx.emit1("Transpose", [both], perm=[1, 0]), fb.ReduceMode.PROD)            # [1, P]
    ctx.emit("Mul", [sampled, ctx.emit1("Reshape", [mask, _index(ctx, [1, out_h, out_w, 1], "shape")])],
             ctx.outputs)


@tflite_op("CUSTOM:TransformLandmarks")
def transform_landmarks(ctx: ImportContext) -> None:
    landmarks, matrix = ctx.input(0), ctx.input(1)
    shape = ctx.value(landmarks).shape
    if len(shape) != 3 or shape[2] not in (2, 3):
        raise ctx.error(f"landmarks must be [B, N, 2] or [B, N, 3], got {list(shape)}")
    b, n, dims = shape
    xy = ctx.emit1("Slice", [landmarks, _index(ctx, [0, 0, 0], "starts"), _index(ctx, [b, n, 2], "ends")])
    ones = _const(ctx, np.ones((b, n, 1), F32), "ones")
    moved = ctx.emit1("MatMul", [ctx.emit1("Concat", [xy, ones], axis=2), _affine_rows(ctx, matrix)],
                      transpose_a=False, transpose_b=False)
    if dims == 2:
        ctx.emit("Identity", [moved], ctx.outputs)
        return
    z = ctx.emit1("Slice", [landmarks, _index(ctx, [0, 0, 2], "starts"), _index(ctx, [b, n, 3], "ends")])
    ctx.emit("Concat", [moved, z], ctx.outputs, axis=2)
