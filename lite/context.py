"""`Context`: threads and the preferred devices of a session, as in MindSpore Lite."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import IntEnum

_log = logging.getLogger("lite")


class DeviceType(IntEnum):
    DT_CPU = 0
    DT_GPU = 1
    DT_NPU = 2


class CpuBindMode(IntEnum):
    NO_BIND = 0
    HIGHER_CPU = 1
    MID_CPU = 2


@dataclass
class CpuDeviceInfo:
    enable_float16: bool = False
    cpu_bind_mode: CpuBindMode = CpuBindMode.MID_CPU


@dataclass
class GpuDeviceInfo:
    enable_float16: bool = False


@dataclass
class NpuDeviceInfo:
    frequency: int = 3


@dataclass
class DeviceContext:
    device_type: DeviceType = DeviceType.DT_CPU
    device_info: CpuDeviceInfo | GpuDeviceInfo | NpuDeviceInfo = field(default_factory=CpuDeviceInfo)


def _default_devices() -> list[DeviceContext]:
    return [DeviceContext(DeviceType.DT_CPU, CpuDeviceInfo())]


@dataclass
class Context:
    """Session settings. `thread_num` bounds the threads a session uses (BLAS and compiled kernels); the first
    available device in `device_list` runs the graph, with the CPU as the fallback. `kernels` picks the kernel
    family: "auto" (compiled kernels from the ahead-of-time library, else from numba when it is importable),
    "aot", "compiled" or "numpy" (the reference); the environment variable MSLITE_KERNELS overrides it."""
    thread_num: int = 2
    device_list: list[DeviceContext] = field(default_factory=_default_devices)
    allocator: object = None
    vendor_name: str = ""
    kernels: str = "auto"

    def resolve_device(self) -> DeviceContext:
        """The device the session will run on: this runtime has only the CPU, so a preferred GPU or NPU
        falls back to it with one logged notice."""
        preferred = self.device_list[0] if self.device_list else DeviceContext()
        if preferred.device_type != DeviceType.DT_CPU:
            _log.warning("%s is not available on this device; falling back to CPU", preferred.device_type.name)
        return next((d for d in self.device_list if d.device_type == DeviceType.DT_CPU), DeviceContext())
