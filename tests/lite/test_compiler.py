"""The compiler's memory checks: a graph that would need more memory than the limit or than the system has
available is refused with MemoryFailedError naming what, never a numpy MemoryError or the OOM killer."""
from __future__ import annotations

import os
import sys

import pytest
from onnx import TensorProto, helper

import lite
from lite import compiler
from tests.util import session_for

GIB = 1 << 30


def _relu(elements: int):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="big_relu")], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, elements])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, elements])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_graph_input_larger_than_the_available_memory_is_memory_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 GiB tensors, under the 16 GiB limit, with 1 GiB available."""
    monkeypatch.setattr(compiler, "available_memory", lambda: GIB)
    with pytest.raises(lite.MemoryFailedError, match=r"'big_relu'.*2147483648 bytes.*1073741824 bytes") as e:
        session_for(_relu(GIB // 2))
    assert e.value.status == lite.RET_MEMORY_FAILED


def test_a_graph_over_the_limit_is_memory_failed_whatever_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler, "available_memory", lambda: 1 << 50)
    with pytest.raises(lite.MemoryFailedError, match="over the 17179869184-byte limit"):
        session_for(_relu(5 * GIB))


@pytest.mark.skipif(sys.platform != "linux", reason="MemAvailable is Linux's")
def test_the_available_memory_is_known_on_linux() -> None:
    available = compiler.available_memory()
    assert available is not None and 0 < available <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
