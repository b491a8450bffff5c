"""Importer rules, grouped by kind; importing this package registers all of them."""
from converter.frontends.onnx.rules import (activations, elementwise, index_ops, nn, quant, signal,  # noqa: F401
                                            tensor_ops, vision)
from converter.frontends.onnx.rules import (contrib, contrib_quant, control_flow, logic, loss, math,  # noqa: F401
                                            norm, random_draws, recurrent, transformer)
