"""Task models built in PyTorch and exported with ``torch.onnx.export`` (TorchScript exporter, opset 17): a small
YOLO-style detector and a small U-Net-style segmenter, seeded, as a user's detection or segmentation export looks.

``tiny_yolo``: input ``input`` [N, 3, S, S] with H and W left dynamic in the export, so the anchor grid stays a
``Range``/``Expand`` computation on the feature map's shape (``converter_lite --inputShape`` fixes the size, and
the converter folds the grid). Outputs: ``boxes`` [N, K, 4] (x1, y1, x2, y2 in
pixels), ``scores`` [N, K] and ``labels`` [N, K] (int64) of the K best anchors (``TopK`` after a ``Where`` that
zeroes low scores), and ``selected`` [M, 3] (batch, class, box) from ``NonMaxSuppression`` over those K boxes.

``tiny_unet``: conv blocks with ``InstanceNormalization``, max-pool down, ``Resize`` (bilinear) up, skip
concatenations; outputs ``logits`` [N, classes, S, S] and ``mask`` [N, S, S] (int64 ``ArgMax`` over classes).

torch is imported when a builder runs: ``models`` itself does not depend on it.
"""

from __future__ import annotations

import io
import warnings

import onnx

OPSET = 17
DETECTOR_OUTPUTS = ["boxes", "scores", "labels", "selected"]
SEGMENTER_OUTPUTS = ["logits", "mask"]


def tiny_yolo(num_classes: int = 3, input_size: int = 64, in_channels: int = 3, batch: int | None = 1,
              seed: int = 0, top_k: int = 20) -> onnx.ModelProto:
    """The detector: three stride-2 conv-BN-SiLU blocks (stride 8), a 1x1 head of 4 box + 1 objectness +
    `num_classes` logits per anchor, decoding and NMS (IoU 0.5, score 0.05, at most 10 boxes)."""
    import torch
    from torch import nn

    class NonMaxSuppression(torch.autograd.Function):
        """ONNX NonMaxSuppression (corner boxes) for export; the eager forward is the same greedy selection."""

        @staticmethod
        def forward(ctx, boxes, scores, max_boxes, iou_threshold, score_threshold):  # noqa: ANN001
            lo, hi = torch.minimum(boxes[..., :2], boxes[..., 2:]), torch.maximum(boxes[..., :2], boxes[..., 2:])
            picked = []
            for b in range(scores.shape[0]):
                area = (hi[b] - lo[b]).prod(-1)
                inter = (torch.minimum(hi[b][:, None], hi[b][None]) - torch.maximum(lo[b][:, None], lo[b][None]))
                iou = inter.clamp(min=0).prod(-1) / (area[:, None] + area[None] - inter.clamp(min=0).prod(-1))
                for c in range(scores.shape[1]):
                    keep: list[int] = []
                    for i in torch.argsort(scores[b, c], descending=True, stable=True).tolist():
                        if scores[b, c, i] > score_threshold and len(keep) < int(max_boxes) and \
                                all(iou[i, j] <= iou_threshold for j in keep):
                            keep.append(i)
                    picked += [[b, c, i] for i in keep]
            return torch.tensor(picked, dtype=torch.int64).reshape(-1, 3)

        @staticmethod
        def symbolic(g, boxes, scores, max_boxes, iou_threshold, score_threshold):  # noqa: ANN001
            return g.op("NonMaxSuppression", boxes, scores, max_boxes, iou_threshold, score_threshold)

    class TinyYolo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            widths = [in_channels, 16, 32, 32]
            self.backbone = nn.Sequential(*(nn.Sequential(nn.Conv2d(i, o, 3, 2, 1, bias=False), nn.BatchNorm2d(o),
                                                          nn.SiLU()) for i, o in zip(widths, widths[1:])))
            self.head = nn.Conv2d(widths[-1], 5 + num_classes, 1)
            self.stride = 8

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            p = self.head(self.backbone(x))
            h, w = p.shape[2], p.shape[3]
            ys = torch.arange(h, dtype=torch.float32).view(h, 1).expand(h, w)
            xs = torch.arange(w, dtype=torch.float32).view(1, w).expand(h, w)
            grid = torch.stack([xs, ys], -1).reshape(1, -1, 2)                  # anchor centres, in cells
            p = p.flatten(2).transpose(1, 2)                                     # [N, H*W, 5 + classes]
            xy = (p[..., :2].sigmoid() + grid) * self.stride
            wh = p[..., 2:4].exp() * self.stride
            scores = p[..., 4:5].sigmoid() * p[..., 5:].sigmoid()
            scores = torch.where(scores > 0.05, scores, torch.zeros_like(scores))
            best, label = scores.max(-1)
            top, index = best.topk(top_k, dim=1)
            boxes = torch.gather(torch.cat([xy - wh / 2, xy + wh / 2], -1), 1, index.unsqueeze(-1).expand(-1, -1, 4))
            selected = NonMaxSuppression.apply(boxes, top.unsqueeze(1), torch.tensor([10]), torch.tensor([0.5]),
                                               torch.tensor([0.05]))
            return boxes, top, torch.gather(label, 1, index), selected

    return _export(TinyYolo(), seed, (batch or 1, in_channels, input_size, input_size), DETECTOR_OUTPUTS,
                   {0: "N", 2: "H", 3: "W"} if batch is None else {2: "H", 3: "W"})


def tiny_unet(num_classes: int = 4, input_size: int = 32, in_channels: int = 3, batch: int | None = 1,
              seed: int = 0) -> onnx.ModelProto:
    """The segmenter: two levels of conv-InstanceNorm-ReLU blocks down (max-pool) and up (bilinear Resize), with
    skip concatenations, a 1x1 classifier and the per-pixel ArgMax."""
    import torch
    from torch import nn

    def block(i: int, o: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(i, o, 3, 1, 1), nn.InstanceNorm2d(o, affine=True), nn.ReLU())

    class TinyUNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc1, self.enc2, self.mid = block(in_channels, 8), block(8, 16), block(16, 16)
            self.dec2, self.dec1 = block(32, 8), block(16, 8)
            self.pool = nn.MaxPool2d(2)
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.classifier = nn.Conv2d(8, num_classes, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            e1 = self.enc1(x)
            e2 = self.enc2(self.pool(e1))
            d2 = self.dec2(torch.cat([self.up(self.mid(self.pool(e2))), e2], 1))
            logits = self.classifier(self.dec1(torch.cat([self.up(d2), e1], 1)))
            return logits, logits.argmax(1)

    return _export(TinyUNet(), seed, (batch or 1, in_channels, input_size, input_size), SEGMENTER_OUTPUTS,
                   {0: "N"} if batch is None else {})


def _export(module: "torch.nn.Module", seed: int, shape: tuple[int, ...], outputs: list[str],  # noqa: F821
            dynamic: dict[int, str]) -> onnx.ModelProto:
    """`module` with seeded weights (norm layers get random affine parameters and running statistics, so they
    are not identities), exported in eval mode."""
    import torch
    from torch import nn

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, generator=generator)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1, generator=generator)
            elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)):
                m.weight.uniform_(0.8, 1.2, generator=generator)
                m.bias.normal_(0, 0.1, generator=generator)
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.normal_(0, 0.1, generator=generator)
                    m.running_var.uniform_(0.5, 2, generator=generator)
    x = torch.randn(shape, generator=generator)
    buf = io.BytesIO()
    with warnings.catch_warnings():      # the TorchScript exporter warns that it is deprecated
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (x,), buf, input_names=["input"], output_names=outputs,
                          opset_version=OPSET, dynamo=False, dynamic_axes={"input": dynamic} if dynamic else None)
    return onnx.load_from_string(buf.getvalue())
