"""ONNX importer rules for the random ops: RandomNormal / RandomUniform (shape from the attribute),
RandomNormalLike / RandomUniformLike (shape from the input), Bernoulli and Multinomial -> Random{mode}.

`dtype` defaults as ONNX says: float32 for the shaped ops, the input's type for the *Like ops and Bernoulli,
int32 for Multinomial."""
from __future__ import annotations

from onnx import TensorProto

from converter.frontends.onnx.registry import ImportContext, onnx_op
from converter.frontends.onnx.rules.tensor_ops import _onnx_type_id
from lite import dtypes
from lite.status import InvalidOpAttrError
from schema import fb

M = fb.RandomMode
# ONNX op -> (mode, shape from an input, {ONNX attribute (= our field): default})
_RANDOM = {
    "RandomNormal": (M.NORMAL, False, {"mean": 0.0, "scale": 1.0}),
    "RandomUniform": (M.UNIFORM, False, {"low": 0.0, "high": 1.0}),
    "RandomNormalLike": (M.NORMAL, True, {"mean": 0.0, "scale": 1.0}),
    "RandomUniformLike": (M.UNIFORM, True, {"low": 0.0, "high": 1.0}),
    "Bernoulli": (M.BERNOULLI, True, {}),
    "Multinomial": (M.MULTINOMIAL, True, {}),
}


@onnx_op(*_RANDOM)
def random_draws(ctx: ImportContext) -> None:
    mode, from_input, params = _RANDOM[ctx.node.op_type]
    attrs = {name: float(ctx.attr(name, default)) for name, default in params.items()}
    if ctx.has_attr("dtype"):
        attrs["data_type"] = _onnx_type_id(ctx, ctx.attr("dtype"), f"{ctx.node.op_type} dtype")
    elif mode == M.MULTINOMIAL:
        attrs["data_type"] = _onnx_type_id(ctx, TensorProto.INT32, "Multinomial dtype")
    elif from_input:
        attrs["data_type"] = dtypes.from_numpy(ctx.value(ctx.input(0)).dtype)
    if not from_input:
        shape = ctx.attr("shape")
        if shape is None:
            raise ctx.error("attribute 'shape' is required", InvalidOpAttrError)
        attrs["shape"] = [int(d) for d in shape]
    if mode == M.MULTINOMIAL:
        attrs["sample_size"] = int(ctx.attr("sample_size", 1))
    if ctx.has_attr("seed"):
        attrs.update(seed=float(ctx.attr("seed")), has_seed=True)
    ctx.emit("Random", ctx.inputs[:1] if from_input else [], ctx.outputs, mode=mode, **attrs)
