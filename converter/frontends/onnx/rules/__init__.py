"""Importer rules, grouped by kind; importing this package registers all of them."""
from converter.frontends.onnx.rules import (activations, elementwise, index_ops, nn, quant, signal,  # noqa: F401
                                            tensor_ops, vision)
from converter.frontends.onnx.rules import (control_flow, logic, loss, math, norm, random_draws,  # noqa: F401
                                            recurrent, transformer)
