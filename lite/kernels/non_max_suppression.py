"""NonMaxSuppression: greedy per-class box selection (ONNX semantics); inputs boxes [B, N, 4], scores [B, C, N],
max_output_boxes_per_class?, iou_threshold?, score_threshold? (scalars); output int64 [K, 3] rows
(batch, class, box), ordered by batch, class, then selection order.

K depends on the box and score values, so the shape rule is the selection itself: `infer` computes the output
value whenever its inputs are known (folded models and any run-time shape inference call it with values) and
says which input is missing otherwise. The selection runs one round per kept box for all batches and classes at
once: take each (batch, class)'s best live box, then suppress the boxes overlapping it by more than the IoU
threshold; the rounds stop when no (batch, class) has a live box left.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


def box_corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(y1, x1, y2, x2), each [B, N] with y1 <= y2 and x1 <= x2, from [y1, x1, y2, x2] corners in any order
    (center_point_box 0) or [x_center, y_center, width, height] (1)."""
    if center_point_box:
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    a, b, c, d = np.moveaxis(boxes, -1, 0)
    return np.minimum(a, c), np.minimum(b, d), np.maximum(a, c), np.maximum(b, d)


def overlaps(corners: tuple[np.ndarray, ...], area: np.ndarray, best: np.ndarray, threshold: float) -> np.ndarray:
    """[B, C, N]: whether box n overlaps box best[b, c] of the same batch by IoU > threshold (boxes without
    area or intersection never overlap)."""
    y1, x1, y2, x2 = (c[:, None, :] for c in corners)
    by1, bx1, by2, bx2, barea = (np.take_along_axis(c, best, axis=1)[..., None] for c in (*corners, area))
    inter = (np.clip(np.minimum(y2, by2) - np.maximum(y1, by1), 0, None)
             * np.clip(np.minimum(x2, bx2) - np.maximum(x1, bx1), 0, None))
    union = barea + area[:, None, :] - inter
    valid = (inter > 0) & (barea > 0) & (area[:, None, :] > 0) & (union > 0)
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=valid)
    return valid & (iou > threshold)


def select_boxes(boxes: np.ndarray, scores: np.ndarray, max_per_class: int, iou_threshold: float,
                 score_threshold: float | None, center_point_box: int) -> np.ndarray:
    """The selected (batch, class, box) rows, int64 [K, 3]."""
    batches, classes, n = scores.shape
    corners = box_corners(boxes, center_point_box)
    area = (corners[2] - corners[0]) * (corners[3] - corners[1])
    live = scores > score_threshold if score_threshold is not None else np.ones(scores.shape, bool)
    keys = np.where(live, scores, -np.inf)
    picks = np.full((min(max(max_per_class, 0), n), batches, classes), -1, np.int64)
    for r in range(picks.shape[0]):
        best = np.argmax(keys, axis=2)                   # ties: the lowest box index, as ONNX's reference
        ok = np.take_along_axis(live, best[..., None], axis=2)[..., 0]
        if not ok.any():
            picks = picks[:r]
            break
        picks[r] = np.where(ok, best, -1)
        live &= ~overlaps(corners, area, best, iou_threshold)
        np.put_along_axis(live, best[..., None], False, axis=2)
        keys[~live] = -np.inf
    per_class = picks.transpose(1, 2, 0)                 # [B, C, rounds]
    b, c, r = np.nonzero(per_class >= 0)
    return np.stack([b, c, per_class[b, c, r]], axis=1).astype(np.int64).reshape(-1, 3)


@register("NonMaxSuppression")
class NonMaxSuppressionKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        boxes, scores = inputs[0], inputs[1]
        if boxes.rank != 3 or boxes.shape[2] != 4:
            raise self.error(f"boxes must be [batches, boxes, 4], got {list(boxes.shape)}")
        if scores.rank != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise self.error(f"scores must be [batches, classes, boxes] = [{boxes.shape[0]}, C, {boxes.shape[1]}]"
                             f" for boxes {list(boxes.shape)}, got {list(scores.shape)}")
        if boxes.dtype.kind != "f" or scores.dtype.kind != "f":
            raise self.error(f"boxes and scores must be float, got {boxes.dtype} and {scores.dtype}")
        if self.attrs.center_point_box not in (0, 1):
            raise self.error(f"center_point_box must be 0 or 1, got {self.attrs.center_point_box}",
                             InvalidOpAttrError)
        self.params = self.parameters(inputs)
        value = self.selected(self.known(boxes, "boxes"), self.known(scores, "scores"))
        return [TensorSpec(value.shape, value.dtype, value)]

    def parameters(self, inputs: Sequence[TensorSpec | None]) -> tuple[int, float, float | None]:
        """(max boxes per class, IoU threshold, score threshold or None) from the optional scalar inputs."""
        def scalar(i: int, what: str) -> float | None:
            spec = inputs[i] if i < len(inputs) else None
            if spec is None:
                return None
            value = self.known(spec, what)
            if value.size != 1:
                raise self.error(f"{what} must be a scalar, got shape {list(value.shape)}")
            return value.item()
        max_per_class = scalar(2, "max_output_boxes_per_class")
        iou = scalar(3, "iou_threshold")
        if iou is not None and not 0.0 <= iou <= 1.0:
            raise self.error(f"iou_threshold must lie in [0, 1], got {iou}", InvalidOpAttrError)
        return int(max_per_class or 0), float(iou or 0.0), scalar(4, "score_threshold")

    def selected(self, boxes: np.ndarray, scores: np.ndarray) -> np.ndarray:
        return select_boxes(boxes, scores, *self.params, int(self.attrs.center_point_box))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], self.selected(inputs[0], inputs[1]))
