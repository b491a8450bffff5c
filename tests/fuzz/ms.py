"""Our `.ms` files, plain, with an integrity footer or encrypted (with `KEY`): import, verify, compile and run
once on the numpy kernels (see `_load`)."""
from __future__ import annotations

from lite import protect
from lite.context import Context
from lite.model import Model
from lite.session import LiteSession
from lite.train import TrainSession
from tests.fuzz.contract import contract

KEY = bytes(range(32))
RUN_ELEMENTS = 1 << 12      # a model is run only when its inputs hold at most this many elements (the seeds: < 100)


def _load(data: bytes) -> None:
    """Import (decrypting with KEY when the buffer says it is encrypted), compile and run once with every input
    1. The kernels are the numpy reference: a compiled backend's first compile of a kernel variant (a new dtype
    or rank in a mutant) takes seconds, past the time bound, and the reader, verifier and compile (shapes, plan,
    arena bound) are the same for every backend. Inputs are 1, not 0: the official control-flow seeds' while
    loops never end on zeros. A model whose inputs hold more than `RUN_ELEMENTS` is compiled, not run: a file
    of a few KB may state a 262,144-step sequence, which is a valid model whose run is long (seconds in numpy),
    not bad input."""
    model = Model.Import(data, dec_key=KEY if protect.is_encrypted(data) else None)
    context = Context(thread_num=1, kernels="numpy")
    session = TrainSession(context) if model.subgraphs else LiteSession(context)
    session.CompileGraph(model)
    inputs = session.GetInputs()
    if sum(tensor.ElementsNum() for tensor in inputs) > RUN_ELEMENTS:
        return
    for tensor in inputs:
        tensor.MutableData()[...] = 1
    session.RunGraph()


TestOneInput = contract(_load)
