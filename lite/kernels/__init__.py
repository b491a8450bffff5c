"""Kernels, one module per op or op family: fp32 and dtype-generic here, `int8/` for quantized models, `grad/` for
training graphs, `control_flow/` for If, Loop and Scan, and `compiled/` for the compiled backend's siblings of
some of them. Each module registers its kernels (`lite.kernel.register`) and declares its op's traits
(`lite.traits.declare`) when imported.

Modules are imported on first lookup, not at `import lite`: `kernel_for`, `traits` and their listings call `load`,
which imports every module `MODULES` names for the op, so a session imports only the kernels of its graph's ops
(importing all of them made `import lite` take 0.20 s of CPU beyond numpy's instead of 0.11 s). `MODULES` answers
"where is op X handled?"; a test checks it against what the modules register and declare.
"""
from __future__ import annotations

import importlib

# module (under lite.kernels) -> the ops it registers kernels for or declares traits of
MODULES: dict[str, tuple[str, ...]] = {
    # fp32 and dtype-generic kernels
    "activation": ("Activation", "PReLU"),
    "affine_grid": ("AffineGrid",),
    "arg_min_max": ("ArgMinMax",),
    "arithmetic": ("Add", "Div", "Maximum", "Minimum", "Mul", "Pow", "Sub"),
    "attention": ("Attention",),
    "batchnorm": ("BatchNorm",),
    "bitcast": ("BitCast",),
    "bitwise": ("Bitwise",),
    "cast": ("Cast",),
    "center_crop_pad": ("CenterCropPad",),
    "col2im": ("Col2Im",),
    "compare": ("Compare",),
    "compress": ("Compress",),
    "concat": ("Concat",),
    "conv2d": ("Conv2D",),
    "conv2d_transpose": ("Conv2DTranspose",),
    "ctc_loss": ("CTCLoss",),
    "cumulative": ("Cumulative",),
    "deform_conv": ("DeformConv",),
    "depth_space": ("DepthToSpace", "SpaceToDepth"),
    "det": ("Det",),
    "dft": ("DFT",),
    "dropout": ("Dropout",),
    "dynamic_quantize": ("DynamicQuantizeLinear",),
    "einsum": ("Einsum",),
    "expand": ("Expand",),
    "eye_like": ("EyeLike",),
    "float_class": ("FloatClass",),
    "full_connection": ("FullConnection", "MatMul"),
    "gather": ("Gather",),
    "gather_elements": ("GatherElements",),
    "gather_nd": ("GatherND",),
    "grid_sample": ("GridSample",),
    "group_norm": ("GroupNorm",),
    "gru": ("GRU",),
    "hardmax": ("Hardmax",),
    "identity": ("Identity",),
    "layer_norm": ("LayerNorm",),
    "linear_attention": ("LinearAttention",),
    "lrn": ("LRN",),
    "lstm": ("LSTM",),
    "max_roi_pool": ("MaxRoiPool",),
    "max_unpool": ("MaxUnpool",),
    "mel_weight_matrix": ("MelWeightMatrix",),
    "mod": ("Mod",),
    "nll_loss": ("NLLLoss",),
    "non_max_suppression": ("NonMaxSuppression",),
    "non_zero": ("NonZero",),
    "one_hot": ("OneHot",),
    "pad": ("Pad",),
    "pooling": ("Pooling",),
    "random_draws": ("Random",),
    "range": ("Range",),
    "reduce": ("Reduce",),
    "reshape": ("Flatten", "Reshape", "Squeeze", "Unsqueeze"),
    "resize": ("Resize",),
    "reverse_sequence": ("ReverseSequence",),
    "rms_norm": ("RMSNorm",),
    "rnn": ("RNN",),
    "roi_align": ("RoiAlign",),
    "rotary_embedding": ("RotaryEmbedding",),
    "scatter_elements": ("ScatterElements",),
    "scatter_nd": ("ScatterND",),
    "shape": ("ConstantOfShape", "Shape"),
    "slice": ("Slice",),
    "softmax": ("LogSoftmax", "Softmax"),
    "split": ("Split",),
    "stft": ("STFT",),
    "tensor_scatter": ("TensorScatter",),
    "tile": ("Tile",),
    "top_k": ("TopK",),
    "transpose": ("Transpose",),
    "trilu": ("Trilu",),
    "unary": ("Abs", "Erf", "Exp", "Log", "Neg", "Sqrt"),
    "unary_math": ("UnaryMath",),
    "unique": ("Unique",),
    "variable": ("Assign",),
    "where": ("Where",),
    "window": ("Window",),
    # control flow (If, Loop, Scan)
    "control_flow.if_op": ("If",),
    "control_flow.loop": ("Loop",),
    "control_flow.scan": ("Scan",),
    # int8 kernels of fully quantized models
    "int8.activation": ("Activation",),
    "int8.arithmetic": ("Add", "Mul"),
    "int8.conv2d": ("Conv2D",),
    "int8.dynamic_matmul": ("FullConnection",),
    "int8.dynamic_recurrent": ("GRU", "LSTM"),
    "int8.full_connection": ("FullConnection", "MatMul"),
    "int8.layer_norm": ("LayerNorm",),
    "int8.pooling": ("Pooling",),
    "int8.quant_cast": ("QuantDTypeCast",),
    "int8.recurrent": ("GRU", "LSTM"),
    "int8.shape_ops": ("Concat", "Flatten", "Pad", "Reshape", "Squeeze", "Transpose", "Unsqueeze"),
    "int8.softmax": ("Softmax",),
    # training: gradients, losses, optimizers
    "grad.activation_grad": ("ActivationGrad", "PReLUGrad"),
    "grad.arithmetic_grad": ("AddGrad", "DivGrad", "MaximumGrad", "MinimumGrad", "MulGrad", "PowGrad", "SubGrad"),
    "grad.attention_grad": ("AttentionGrad",),
    "grad.batchnorm_grad": ("BatchNormGrad",),
    "grad.concat_grad": ("ConcatGrad",),
    "grad.conv2d_grad": ("BiasGrad", "Conv2DGradFilter", "Conv2DGradInput"),
    "grad.cumulative_grad": ("CumProdGrad",),
    "grad.det_grad": ("DetGrad",),
    "grad.dropout_grad": ("DropoutGrad",),
    "grad.full_connection_grad": ("FullConnectionGrad", "MatMulGrad"),
    "grad.grid_sample_grad": ("GridSampleGrad",),
    "grad.group_norm_grad": ("GroupNormGrad",),
    "grad.gru_grad": ("GRUGrad",),
    "grad.layer_norm_grad": ("LayerNormGrad",),
    "grad.loss": ("BinaryCrossEntropy", "MSELoss", "SmoothL1Loss", "SoftmaxCrossEntropyWithLogits",
                  "SparseSoftmaxCrossEntropyWithLogits"),
    "grad.lrn_grad": ("LRNGrad",),
    "grad.lstm_grad": ("LSTMGrad",),
    "grad.nll_loss_grad": ("NLLLossGrad",),
    "grad.optimizer": ("Adam", "ApplyMomentum", "Assign", "Sgd"),
    "grad.pad_grad": ("PadGrad",),
    "grad.pooling_grad": ("PoolingGrad",),
    "grad.reduce_grad": ("ReduceGrad",),
    "grad.reshape_grad": ("ReshapeGrad",),
    "grad.rms_norm_grad": ("RMSNormGrad",),
    "grad.rnn_grad": ("RNNGrad",),
    "grad.slice_grad": ("SliceGrad",),
    "grad.softmax_grad": ("LogSoftmaxGrad", "SoftmaxGrad"),
    "grad.split_grad": ("SplitGrad",),
    "grad.unary_grad": ("AbsGrad", "ErfGrad", "ExpGrad", "LogGrad", "NegGrad", "SqrtGrad"),
    "grad.unary_math_grad": ("UnaryMathGrad",),
    "grad.where_grad": ("WhereGrad",),
    # the compiled backend's siblings (numba; started only when a session chooses one)
    "compiled.activation": ("Activation", "PReLU"),
    "compiled.activation_grad": ("ActivationGrad",),
    "compiled.attention": ("Attention",),
    "compiled.batchnorm_grad": ("BatchNormGrad",),
    "compiled.conv2d": ("Conv2D",),
    "compiled.conv2d_grad": ("Conv2DGradFilter", "Conv2DGradInput"),
    "compiled.full_connection": ("FullConnection",),
    "compiled.gru": ("GRU",),
    "compiled.int8_arithmetic": ("Add", "Mul"),
    "compiled.int8_conv2d": ("Conv2D",),
    "compiled.int8_dynamic_matmul": ("FullConnection",),
    "compiled.int8_dynamic_recurrent": ("GRU", "LSTM"),
    "compiled.int8_full_connection": ("FullConnection",),
    "compiled.int8_quant_cast": ("QuantDTypeCast",),
    "compiled.int8_recurrent": ("GRU", "LSTM"),
    "compiled.layer_norm": ("LayerNorm",),
    "compiled.lstm": ("LSTM",),
    "compiled.optimizer": ("Adam", "ApplyMomentum", "Sgd"),
    "compiled.pooling": ("Pooling",),
    "compiled.pooling_grad": ("PoolingGrad",),
    "compiled.resize": ("Resize",),
    "compiled.softmax": ("Softmax",),
}

_BY_OP: dict[str, tuple[str, ...]] = {}
for _module, _ops in MODULES.items():
    for _op in _ops:
        _BY_OP[_op] = (*_BY_OP.get(_op, ()), _module)
_loaded: set[str] = set()


def load(op: str) -> None:
    """Import the modules of `op` (none for an op no kernel handles): its kernels and traits are then known."""
    if op not in _loaded:
        for module in _BY_OP.get(op, ()):
            importlib.import_module(f"lite.kernels.{module}")
        _loaded.add(op)


def load_all() -> None:
    """Import every kernel module (for listings of all ops: the op table, its tests)."""
    for op in _BY_OP:
        load(op)
