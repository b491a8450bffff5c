"""The handle table of the Java bridge (`jni/native/bridge.py`), in Python: a handle that is 0, freed, never
issued or of the wrong kind is refused with a status, which the Java side turns into a LiteException."""
from __future__ import annotations

import importlib.util

import pytest

import lite
from tests.util import REPO


@pytest.fixture(scope="module")
def bridge():
    spec = importlib.util.spec_from_file_location("_mslite_jni_test", REPO / "jni" / "native" / "bridge.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_freed_unknown_and_zero_handles_are_null_pointer_errors(bridge):
    handle = bridge.create_config(0, 2, 2, False)
    assert isinstance(bridge.get(handle, lite.Context), lite.Context)
    bridge.free(handle)
    for stale in (handle, 0, 10**12):
        with pytest.raises(lite.LiteError) as error:
            bridge.get(stale, lite.Context)
        assert error.value.status == lite.RET_NULL_PTR
    with pytest.raises(lite.LiteError) as error:
        bridge.free(handle)
    assert error.value.status == lite.RET_NULL_PTR


def test_handles_are_never_reused(bridge):
    first = bridge.create_config(0, 1, 0, False)
    bridge.free(first)
    assert bridge.create_config(0, 1, 0, False) > first


def test_a_handle_of_another_kind_is_a_parameter_error(bridge):
    handle = bridge.create_config(0, 2, 2, False)
    with pytest.raises(lite.LiteError) as error:
        bridge.run_graph(handle)
    assert error.value.status == lite.RET_PARAM_INVALID
    bridge.free(handle)


def test_non_lite_errors_are_described_with_the_generic_status(bridge):
    assert bridge.describe(ValueError("bad")) == (lite.RET_ERROR, "ValueError: bad")
    status, message = bridge.describe(lite.InputTensorError("tensor 'x' is short"))
    assert status == lite.RET_INPUT_TENSOR_ERROR and message.startswith("tensor 'x' is short")
