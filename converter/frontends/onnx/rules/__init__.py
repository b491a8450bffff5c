"""Importer rules, grouped by kind; importing this package registers all of them."""
from converter.frontends.onnx.rules import activations, elementwise, nn, quant, signal, tensor_ops, vision  # noqa: F401
