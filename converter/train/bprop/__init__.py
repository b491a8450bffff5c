"""bprop rules, one small function per forward op, registered by op name (`RULES["Conv2D"]`)."""
from converter.train.bprop import (elementwise, index, nn, recurrent, shape, transformer,  # noqa: F401
                                   vision)  # (registers every rule)
from converter.train.bprop.rule import RULES, Bprop, Grads, bprop, differentiable

__all__ = ["RULES", "Bprop", "Grads", "bprop", "differentiable"]
