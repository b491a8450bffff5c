"""Signatures: a model with several entry points (a TFLite file's signature defs, LiteRT's
`get_signature_runner(key)`) holds each as a subgraph named `PREFIX + key` over the one tensor table, the default
entry point first. The tensors of entry point `key` are named `key/<name>`; a session shows an entry point's
inputs and outputs by `<name>`, as its signature def names them. Variables (state) are shared by every entry point.
"""
from __future__ import annotations

from lite.model import Model, SubGraphDef

PREFIX = "signature:"


def signatures(model: Model) -> dict[str, SubGraphDef]:
    """The model's entry points by key, the default first (empty for a model of one graph)."""
    return {name[len(PREFIX):]: sg for name, sg in model.subgraphs.items() if name.startswith(PREFIX)}


def scoped(key: str, name: str) -> str:
    """The tensor name that `name` of entry point `key` has in the file."""
    return f"{key}/{name}"


def local_name(key: str | None, name: str) -> str:
    """The name entry point `key` gives the file's tensor `name`."""
    prefix = f"{key}/" if key is not None else ""
    return name[len(prefix):] if prefix and name.startswith(prefix) else name
