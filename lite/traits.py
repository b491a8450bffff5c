"""Op traits: what generic code (converter passes, quantization, the training builder, sessions) needs to know
about an op, declared once beside the op's kernel in `lite/kernels/`.

A kernel module declares its op's traits next to its `@register`:

    declare("Conv2D", weight_input=1, weight_axis=0, bias_input=2, bias_correction=True,
            fused_activation=True, batchnorm_folds=True, absorbs_pad=True)

and generic code asks `traits(op)` instead of testing op names. An op without a declaration gets the defaults
(`OpTraits()`): no weight, no fusion, layout-bound, the same graph in training as in inference. Every field is
about the op, not a data type; what differs per kernel (in-place, foldable) stays a `Kernel` class flag.
A module's declarations take effect when it is imported, which `traits(op)` does first (`lite.kernels.load`):
nothing has to import every kernel module before asking.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from lite import kernels

# Layout kinds: how an op meets a Transpose of its input (the to_nhwc pass)
BOUND = "bound"                # needs its input in the layout it was written for; transposes stay around it
ELEMENTWISE = "elementwise"    # value by value (broadcasting): the transpose moves past it, constants permuted
AXIS = "axis"                  # an `axis` attribute: renumbered by the permutation
AXES_INPUT = "axes_input"      # a constant `axes` input (input 1), with `keep_dims`: renumbered
PER_AXIS = "per_axis"          # constant inputs holding one value per axis: permuted
LAYOUT_KINDS = (BOUND, ELEMENTWISE, AXIS, AXES_INPUT, PER_AXIS)

# Per-axis input kinds (PER_AXIS)
ONE_PER_AXIS = "axis"          # [rank] values, one per axis (Resize scales, sizes)
BEGIN_END = "begin_end"        # [2 * rank] values: all begins, then all ends (Pad pads, Resize roi)

# When a node is the identity (remove_identity)
ALWAYS = "always"              # at inference it returns its input (Identity, Dropout)
SAME_DTYPE = "same_dtype"      # when input and output dtypes are equal (Cast)
SAME_SHAPE = "same_shape"      # when input and output static shapes are equal (Reshape, Squeeze, ...)
IDENTITY_PERM = "identity_perm"  # when its `perm` attribute is 0, 1, ..., rank - 1 (Transpose)
NOOP_KINDS = (ALWAYS, SAME_DTYPE, SAME_SHAPE, IDENTITY_PERM)


@dataclass(frozen=True)
class Layout:
    """How the to_nhwc pass moves a transpose through the op (`kind` is one of LAYOUT_KINDS)."""
    kind: str = BOUND
    axis_default: int = 0                        # AXIS: the attribute's default value
    all_inputs: bool = False                     # AXIS: every input carries data (Concat), not only input 0
    per_axis: tuple[tuple[int, str], ...] = ()   # PER_AXIS: (input index, ONE_PER_AXIS | BEGIN_END)

    def __post_init__(self) -> None:
        if self.kind not in LAYOUT_KINDS:
            raise ValueError(f"layout kind {self.kind!r} is not one of {LAYOUT_KINDS}")


@dataclass(frozen=True)
class TrainMode:
    """How the op runs in the training graph's forward (when it differs from inference)."""
    outputs: tuple[str, ...] = ()       # tensors appended in train mode, read by its gradient (node-name suffixes)
    flag: bool = False                  # sets the op's `training` attribute (the kernel's train-mode form)
    random: bool = False                # draws random numbers (the session seeds them per step: Dropout)
    unless_frozen: tuple[int, ...] = ()  # stays in inference form when all of these inputs are frozen
    state_inputs: tuple[tuple[int, str], ...] = ()   # (input, role) it updates in place: each its own tensor


@dataclass(frozen=True)
class Bodies:
    """A control-flow op's subgraphs: the attributes holding their indices into the file's subgraphs, and how the
    node's inputs and outputs line up with every body's, position by position (same count, same dtypes): node
    inputs from `inputs_from` on are body inputs from `body_inputs_from` on; node outputs are body outputs from
    `body_outputs_from` on. The loader checks this, and the converter and the kernels rely on it."""
    attrs: tuple[str, ...]
    inputs_from: int = 0
    body_inputs_from: int = 0
    body_outputs_from: int = 0


@dataclass(frozen=True)
class OpTraits:
    """The declarative record of one op. Input indices count the op's inputs in our schema's order."""
    # weights and quantization
    weight_input: int | None = None     # the constant weight input (quantized per channel)
    weight_axis: int = 0                # the weight's output-channel axis (negative: from the end)
    bias_input: int | None = None       # the bias input (INT32 with scale s_x * s_w[c] in int8 models)
    bias_correction: bool = False       # int8: the mean output error per channel is folded into the bias
    same_quant: bool = False            # int8: output 0 keeps input 0's quantization parameters (moves values)
    # graph rewrites
    fused_activation: bool = False      # has an `activation` attribute applied to its output (fuse_activation)
    batchnorm_folds: bool = False       # an inference BatchNorm on its output channels folds into weight and bias
    absorbs_pad: bool = False           # a constant zero spatial Pad before it becomes its pad_* attributes
    residual_input: int | None = None   # optional input added to its output before the activation (fuse_residual)
    noop: str | None = None             # when the node returns its input unchanged (one of NOOP_KINDS)
    layout: Layout = Layout()
    # control flow
    bodies: Bodies | None = None        # the subgraphs the op runs (If, Loop, Scan)
    # training
    train: TrainMode | None = None      # None: the training forward runs the node as at inference

    def __post_init__(self) -> None:
        if self.noop is not None and self.noop not in NOOP_KINDS:
            raise ValueError(f"noop {self.noop!r} is not one of {NOOP_KINDS}")
        if self.bias_correction and self.weight_input is None:
            raise ValueError("bias_correction needs a weight_input")
        if self.batchnorm_folds and (self.weight_input is None or self.bias_input is None):
            raise ValueError("batchnorm_folds needs a weight_input and a bias_input")
        if self.residual_input is not None and (self.bias_input is None or self.residual_input != self.bias_input + 1
                                                or not self.fused_activation):
            raise ValueError("residual_input comes right after a bias_input, on an op with a fused activation")


DEFAULT = OpTraits()
_DECLARED: dict[str, OpTraits] = {}


def declare(*ops: str, **fields_: Any) -> OpTraits:
    """Declare the traits of `ops` (spelled out, so that searching an op's name finds its declaration)."""
    record = OpTraits(**fields_)
    for op in ops:
        if op in _DECLARED:
            raise RuntimeError(f"traits of {op} declared twice")
        _DECLARED[op] = record
    return record


def traits(op: str) -> OpTraits:
    """The traits of `op` (importing its kernel modules on first lookup); the defaults when it declares none."""
    kernels.load(op)
    return _DECLARED.get(op, DEFAULT)


def declared() -> dict[str, OpTraits]:
    """Every declaration, by op name, every kernel module imported (for the op table and its tests)."""
    kernels.load_all()
    return dict(_DECLARED)


def non_default(record: OpTraits) -> dict[str, Any]:
    """The fields of `record` that differ from the defaults (how the op table shows an op's traits)."""
    return {f.name: getattr(record, f.name) for f in fields(OpTraits)
            if getattr(record, f.name) != getattr(DEFAULT, f.name)}
