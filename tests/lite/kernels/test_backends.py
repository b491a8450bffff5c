"""Kernel backends as a registry axis (lite/kernel.py, lite/kernels/compiled/): a compiled kernel is a sibling of
a numpy kernel for the same (op, data type), chosen only by the registry; converting a model runs the numpy
kernels and never starts numba."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from lite import kernel
from lite.dtypes import DataType
from lite.kernel import ENV, REFERENCE, TensorSpec, kernel_for, kernel_to_run, register, registered, selection
from lite.kernels.compiled.conv2d import Conv2DCompiled
from lite.kernels.conv2d import Conv2DKernel
from lite.model import NodeDef
from schema import attrs as op_attrs
from tests.util import REPO

HAVE_NUMBA = importlib.util.find_spec("numba") is not None

# a Conv + Relu + MaxPool of constants (folded while converting: Conv2D and Pooling kernels run), added to the input
CONVERT = """
import json, sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from converter import convert
from lite.model import Model
from tests.util import small_cnn
rng = np.random.default_rng(0)
const = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
nodes = [helper.make_node("Conv", ["c", "w"], ["y"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["y"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Add", ["x", "p"], ["z"])]
graph = helper.make_graph(nodes, "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [const("c", 1, 3, 8, 8), const("w", 8, 3, 3, 3)])
folded = convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
convert(small_cnn())
print(json.dumps(["numba" in sys.modules, [node.op for node in Model.Import(folded, len(folded)).nodes]]))
"""


def test_converting_a_model_starts_no_numba() -> None:
    """In a fresh interpreter whose environment asks for nothing, converting (shape inference and constant
    folding through the runtime's kernels) leaves numba unimported, as it did not when folding took the compiled
    siblings."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    result = subprocess.run([sys.executable, "-c", CONVERT], cwd=REPO, env=env, capture_output=True, text=True,
                            check=True)
    numba_imported, ops = json.loads(result.stdout.splitlines()[-1])
    assert "Conv2D" not in ops and "Pooling" not in ops          # the constant branch was folded
    assert numba_imported is False


def conv_node() -> NodeDef:
    return NodeDef("conv", "Conv2D", op_attrs.build("Conv2D", {"pad_mode": 0}), [0, 1], [2])


def test_the_registry_chooses_the_sibling_the_selection_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert kernel_for("Conv2D", DataType.FLOAT32) is Conv2DKernel           # what exists: the numpy kernel
    with selection(REFERENCE):
        assert kernel_to_run("Conv2D", DataType.FLOAT32) is Conv2DKernel
    assert kernel_to_run("LogSoftmax", DataType.FLOAT32) is kernel_for("LogSoftmax", DataType.FLOAT32)   # no sibling
    if HAVE_NUMBA:
        with selection("compiled", 2):
            assert kernel_to_run("Conv2D", DataType.FLOAT32) is Conv2DCompiled
            monkeypatch.setenv(ENV, REFERENCE)                                # the environment wins
            assert kernel_to_run("Conv2D", DataType.FLOAT32) is Conv2DKernel


def test_every_sibling_subclasses_the_numpy_kernel_of_its_key() -> None:
    table = registered()
    siblings = {key: cls for key, cls in table.items() if key[3] != REFERENCE}
    assert siblings and all(issubclass(cls, table[(*key[:3], REFERENCE)]) for key, cls in siblings.items())
    assert {key[3] for key in siblings} <= set(kernel.BACKENDS)


def test_a_sibling_without_a_numpy_kernel_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no numpy kernel to be a sibling of"):
        register("NoSuchOp", DataType.FLOAT32, backend="compiled")(Conv2DKernel)


def test_infer_gives_shapes_and_select_the_algorithm() -> None:
    x, w = TensorSpec((1, 16, 16, 40), np.dtype(np.float32)), TensorSpec((40, 3, 3, 40), np.dtype(np.float32))
    w.value = np.full(w.shape, 0.5, np.float32)     # not whole numbers: those take no Winograd (ConvInteger)
    conv = Conv2DKernel(conv_node())
    with selection(REFERENCE, 1):
        assert [s.shape for s in conv.infer([x, w])] == [(1, 14, 14, 40)]
        assert not hasattr(conv, "winograd")
        conv.select([x, w])
    assert conv.winograd               # numpy's F(2x2): a 3x3 conv of a constant weight, 49 tiles, one thread


BACKEND_NAMES = re.compile(r"compiled\.(enabled|usable)\(|from lite\.kernels import [^\n]*\bcompiled\b|"
                           r"lite\.kernels\.compiled")


def test_no_backend_check_outside_the_registry_and_the_backend() -> None:
    """Only lite/kernel.py and lite/kernels/compiled/ know the compiled backend: no other module of the
    project imports it or asks whether it runs (but the benches of its ahead-of-time library: the aarch64
    check, which builds it there, the signature census and the start-up bench, which waits for it)."""
    allowed = {REPO / "lite" / "kernel.py"} | {REPO / "bench" / name for name in
                                               ("aarch64_check.py", "aot_signatures.py", "bench_startup.py")}
    offenders = [path.relative_to(REPO).as_posix()
                 for folder in ("lite", "converter", "models", "bench", "schema", "examples")
                 for path in sorted((REPO / folder).rglob("*.py"))
                 if path not in allowed and (REPO / "lite" / "kernels" / "compiled") not in path.parents
                 and BACKEND_NAMES.search(path.read_text())]
    assert offenders == []
