"""The Python side of the Java API `com.mindspore.lite`: a handle table and one function per native method.

Compiled into libmindspore-lite-jni.so and run once as the module `_mslite_jni` when the library starts the
embedded interpreter. Every Java object holds a handle: a key of `_objects`, never reused, so a freed, stale or
forged handle is a clean `LiteError` with RET_NULL_PTR, never a dangling pointer. The C side calls these
functions with the GIL held and turns a raised `LiteError` into a Java `LiteException` (status, message).
"""
from __future__ import annotations

import gc
import itertools
import os
import sys
from typing import Any

import lite
from lite.context import GpuDeviceInfo, NpuDeviceInfo
from lite.dtypes import to_numpy, type_name
from lite.status import RET_ERROR, RET_NULL_PTR, InputTensorError, LiteError, NotSupportedError, ParamInvalidError

_objects: dict[int, Any] = {}
_ids = itertools.count(1)
ANY_TYPE = 0                    # tensor_array(): raw bytes, any dtype
NO_QUANTIZATION = (0, 1)        # TrainSession.export(): MindSpore's QT_DEFAULT and QT_NONE


class NullHandleError(LiteError):
    """A handle that is 0, already freed, or not from this library."""
    status = RET_NULL_PTR


# ---- handles ---------------------------------------------------------------------------------------------------
def put(obj: Any) -> int:
    handle = next(_ids)
    _objects[handle] = obj
    return handle


def get(handle: int, kind: type) -> Any:
    obj = _objects.get(handle)
    if obj is None:
        raise NullHandleError(f"{kind.__name__} handle {handle} is null or already freed")
    if not isinstance(obj, kind):
        raise ParamInvalidError(f"handle {handle} is a {type(obj).__name__}, not a {kind.__name__}")
    return obj


def free(handle: int) -> None:
    if _objects.pop(handle, None) is None:
        raise NullHandleError(f"handle {handle} is null or already freed")


def live_handles() -> int:
    return len(_objects)


def python_objects() -> int:
    """Objects tracked by the garbage collector after a full collection: grows if calls leak containers."""
    gc.collect()
    return len(gc.get_objects())


def allocated_blocks() -> int:
    """pymalloc blocks in use after a full collection: grows if calls leak any small object."""
    gc.collect()
    return sys.getallocatedblocks()


def python_info() -> str:
    return f"Python {sys.version.split()[0]} executable={sys.executable} prefix={sys.prefix} lite={lite.__file__}"


def describe(error: BaseException) -> tuple[int, str]:
    """(status, message) of a Python exception for a Java LiteException."""
    if isinstance(error, LiteError):
        return int(error.status), str(error)
    return RET_ERROR, f"{type(error).__name__}: {error}"


# ---- config.MSConfig, Model ----------------------------------------------------------------------------------
def create_config(device_type: int, thread_num: int, cpu_bind_mode: int, enable_float16: bool) -> int:
    if device_type not in lite.DeviceType._value2member_map_:
        raise ParamInvalidError(f"MSConfig.init: unknown device type {device_type} (DT_CPU=0, DT_GPU=1, DT_NPU=2)")
    if cpu_bind_mode not in lite.CpuBindMode._value2member_map_:
        raise ParamInvalidError(f"MSConfig.init: unknown cpu bind mode {cpu_bind_mode} (NO_BIND=0, HIGHER_CPU=1, "
                                f"MID_CPU=2)")
    if thread_num < 1:
        raise ParamInvalidError(f"MSConfig.init: threadNum must be >= 1, got {thread_num}")
    cpu = lite.DeviceContext(lite.DeviceType.DT_CPU, lite.CpuDeviceInfo(enable_float16, lite.CpuBindMode(cpu_bind_mode)))
    devices = [cpu]
    if device_type == lite.DeviceType.DT_GPU:
        devices.insert(0, lite.DeviceContext(lite.DeviceType.DT_GPU, GpuDeviceInfo(enable_float16)))
    elif device_type == lite.DeviceType.DT_NPU:
        devices.insert(0, lite.DeviceContext(lite.DeviceType.DT_NPU, NpuDeviceInfo()))
    return put(lite.Context(thread_num=thread_num, device_list=devices))


def load_model_file(path: str) -> int:
    return put(lite.Model.Load(path))


def load_model_buffer(buf: bytes) -> int:
    return put(lite.Model.Import(buf))


# ---- LiteSession ---------------------------------------------------------------------------------------------
def create_session(config: int) -> int:
    return put(lite.LiteSession.CreateSession(get(config, lite.Context)))


def create_session_with_model(buf: bytes, config: int) -> int:
    return put(lite.LiteSession.CreateSession(buf, len(buf), get(config, lite.Context)))


def compile_graph(session: int, model: int) -> None:
    get(session, lite.LiteSession).CompileGraph(get(model, lite.Model))


def run_graph(session: int) -> None:
    get(session, lite.LiteSession).RunGraph()


def bind_thread(session: int, if_bind: bool) -> None:
    get(session, lite.LiteSession).BindThread(if_bind)


def _handles(tensors: Any) -> list[int]:
    return [put(t) for t in tensors]


def inputs(session: int) -> list[int]:
    return _handles(get(session, lite.LiteSession).GetInputs())


def input_by_name(session: int, name: str) -> int:
    tensor = get(session, lite.LiteSession).GetInputsByTensorName(name)
    return put(tensor) if tensor is not None else 0


def outputs(session: int) -> list[int]:
    return _handles(get(session, lite.LiteSession).GetOutputs().values())


def output_names(session: int) -> list[str]:
    return get(session, lite.LiteSession).GetOutputTensorNames()


def output_by_name(session: int, name: str) -> int:
    tensor = get(session, lite.LiteSession).GetOutputByTensorName(name)
    return put(tensor) if tensor is not None else 0


def outputs_by_node_name(session: int, name: str) -> list[int]:
    return _handles(get(session, lite.LiteSession).GetOutputsByNodeName(name))


def resize(session: int, tensors: list[int], dims: list[list[int]]) -> None:
    get(session, lite.LiteSession).Resize([get(t, lite.MSTensor) for t in tensors], dims)


# ---- TrainSession ----------------------------------------------------------------------------------------------
def create_train_session(path: str, config: int, train_mode: bool) -> int:
    return put(lite.TrainSession.CreateSession(path, get(config, lite.Context), train_mode))


def _train(session: int) -> lite.TrainSession:
    return get(session, lite.TrainSession)


def set_train(session: int) -> None:
    _train(session).Train()


def set_eval(session: int) -> None:
    _train(session).Eval()


def is_train(session: int) -> bool:
    return _train(session).IsTrain()


def is_eval(session: int) -> bool:
    return _train(session).IsEval()


def set_learning_rate(session: int, learning_rate: float) -> None:
    _train(session).SetLearningRate(learning_rate)


def setup_virtual_batch(session: int, multiplier: int, learning_rate: float, momentum: float) -> None:
    _train(session).SetupVirtualBatch(multiplier, learning_rate, momentum)


def predictions(session: int) -> list[int]:
    return _handles(_train(session).GetPredictions())


def feature_maps(session: int) -> list[int]:
    return _handles(_train(session).GetFeatureMaps())


def update_feature_maps(session: int, tensors: list[int]) -> None:
    _train(session).UpdateFeatureMaps([get(t, lite.MSTensor) for t in tensors])


def export(session: int, path: str, model_type: int, quantization_type: int) -> None:
    if quantization_type not in NO_QUANTIZATION:
        raise NotSupportedError(f"TrainSession.export: quantization type {quantization_type} is not supported "
                                f"(QT_DEFAULT=0 and QT_NONE=1 export without quantization; quantize with "
                                f"converter_lite)")
    _train(session).Export(os.fspath(path), model_type)


def save_to_file(session: int, path: str) -> None:
    _train(session).SaveToFile(os.fspath(path))


# ---- MSTensor --------------------------------------------------------------------------------------------------
def _tensor(tensor: int) -> lite.MSTensor:
    return get(tensor, lite.MSTensor)


def tensor_array(tensor: int, type_id: int, nbytes: int) -> Any:
    """The tensor's memory for the C side to copy from (`nbytes` < 0) or into (`nbytes` bytes), after checking
    that the Java element type matches the tensor's dtype (`ANY_TYPE` for raw bytes) and the size fits."""
    t = _tensor(tensor)
    array = t.MutableData()
    if type_id != ANY_TYPE and t.data_type() != type_id:
        raise InputTensorError(f"tensor '{t.tensor_name()}' holds {type_name(t.data_type())} data, not "
                               f"{type_name(type_id)}")
    if nbytes >= 0 and nbytes != array.nbytes:
        item = to_numpy(type_id).itemsize if type_id != ANY_TYPE else 1
        raise InputTensorError(f"tensor '{t.tensor_name()}' {list(array.shape)} takes {array.nbytes // item} "
                               f"{'bytes' if type_id == ANY_TYPE else type_name(type_id) + ' values'}, got "
                               f"{nbytes // item}")
    return array


def shape(tensor: int) -> list[int]:
    return _tensor(tensor).shape()


def data_type(tensor: int) -> int:
    return _tensor(tensor).data_type()


def size(tensor: int) -> int:
    return _tensor(tensor).Size()


def elements_num(tensor: int) -> int:
    return _tensor(tensor).ElementsNum()


def tensor_name(tensor: int) -> str:
    return _tensor(tensor).tensor_name()


def item_size(tensor: int) -> int:
    return _tensor(tensor).MutableData().itemsize


def version() -> str:
    return lite.Version()
