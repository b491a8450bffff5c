"""Importer rules for MindSpore primitives, one module per family; importing the package registers them all."""
from converter.frontends.mindir.rules import elementwise, nn, recurrent, tensor_ops  # noqa: F401
