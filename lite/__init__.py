"""The runtime: load a `.ms` model and run it with the MindSpore Lite session API (numpy + flatbuffers only)."""
from lite.context import Context, CpuBindMode, CpuDeviceInfo, DeviceContext, DeviceType, GpuDeviceInfo, NpuDeviceInfo
from lite.dtypes import DataType
from lite.dump import Dump
from lite.model import Model
from lite.session import CallBackParam, LiteSession
from lite.status import *  # noqa: F401,F403  (RET_* codes, GetErrorInfo, LiteError and its subclasses)
from lite.status import GetErrorInfo, LiteError
from lite.tensor import MSTensor

__version__ = "0.1.0"


def Version() -> str:
    """The runtime version, in MindSpore Lite's form."""
    return f"MindSpore Lite (Python) {__version__}"

from lite.train import (MT_INFERENCE, MT_TRAIN, AccuracyMetrics, ClassificationTrainAccuracyMonitor,  # noqa: E402
                        CkptSaver, Dataset, LossMonitor, LRScheduler, Metrics, MultiplicativeLRLambda,
                        NonFiniteLossError, StepLRLambda, TrainLoop, TrainLoopCallBack, TrainLoopCallBackData,
                        TrainSession, TransferSession)
