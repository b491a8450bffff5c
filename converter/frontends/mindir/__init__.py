"""MINDIR frontend: a MindSpore model exported with `mindspore.export(..., file_format='MINDIR')` (MindSpore
1.x-2.x, both attribute styles) becomes an IR graph of our canonical ops. The file is read through our own
`mind_ir.proto`: converting needs no `mindspore` package."""
from __future__ import annotations

from converter.frontends.mindir.importer import import_model, supported_ops
from converter.frontends.mindir.registry import IMPORTERS, mindir_op
from converter.frontends.mindir.source import MindirSource, load

__all__ = ["import_model", "load", "supported_ops", "IMPORTERS", "MindirSource", "mindir_op"]
