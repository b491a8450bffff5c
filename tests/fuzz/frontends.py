"""The converter's frontends: a model file through `load` and `to_ir` (the imported IR)."""
from __future__ import annotations

from typing import Callable

from converter.frontends import frontend
from tests.fuzz.contract import contract


def importer(fmk: str) -> Callable[[bytes], None]:
    """The harness of `--fmk=<fmk>`."""
    def _import(data: bytes) -> None:
        frontend(fmk).load(data, f"<fuzzed {fmk}>").to_ir()
    _import.__doc__ = f"A {fmk} model imported into the IR."
    return contract(_import)
