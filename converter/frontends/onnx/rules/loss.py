"""ONNX importer rules for the losses and for dynamic quantization: NegativeLogLikelihoodLoss -> NLLLoss;
SoftmaxCrossEntropyLoss -> LogSoftmax over the class axis (its optional log_prob output) + NLLLoss;
DynamicQuantizeLinear."""
from __future__ import annotations

from converter.frontends.onnx.registry import ImportContext, onnx_op
from lite.status import InvalidOpAttrError
from schema import fb

_REDUCTIONS = {"none": fb.LossReduction.NONE, "mean": fb.LossReduction.MEAN, "sum": fb.LossReduction.SUM}


def _loss_attrs(ctx: ImportContext) -> dict:
    reduction = ctx.attr("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise ctx.error(f"reduction '{reduction}' is not one of {sorted(_REDUCTIONS)}", InvalidOpAttrError)
    ignore = ctx.attr("ignore_index")
    return dict(reduction=_REDUCTIONS[reduction], ignore_index=int(ignore or 0), has_ignore_index=ignore is not None)


@onnx_op("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(ctx: ImportContext) -> None:
    ctx.emit("NLLLoss", [i for i in ctx.inputs[:3] if i], ctx.outputs[:1], **_loss_attrs(ctx))


@onnx_op("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(ctx: ImportContext) -> None:
    scores, labels, weights = ctx.input(0), ctx.input(1), ctx.input(2)
    log_prob = ctx.outputs[1] if len(ctx.outputs) > 1 and ctx.outputs[1] else None
    log_prob = ctx.emit1("LogSoftmax", [scores], log_prob, axis=1)
    ctx.emit("NLLLoss", [log_prob, labels] + ([weights] if weights else []), ctx.outputs[:1], **_loss_attrs(ctx))


@onnx_op("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx: ImportContext) -> None:
    ctx.emit("DynamicQuantizeLinear", [ctx.input(0)], ctx.outputs)
