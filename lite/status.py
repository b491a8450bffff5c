"""MindSpore Lite status codes and the exceptions that carry them."""
from __future__ import annotations

__all__ = [
    "RET_OK",
    "RET_ERROR",
    "RET_NULL_PTR",
    "RET_PARAM_INVALID",
    "RET_NO_CHANGE",
    "RET_SUCCESS_EXIT",
    "RET_MEMORY_FAILED",
    "RET_NOT_SUPPORT",
    "RET_THREAD_POOL_ERROR",
    "RET_OUT_OF_TENSOR_RANGE",
    "RET_INPUT_TENSOR_ERROR",
    "RET_REENTRANT_ERROR",
    "RET_GRAPH_FILE_ERR",
    "RET_NOT_FIND_OP",
    "RET_INVALID_OP_NAME",
    "RET_INVALID_OP_ATTR",
    "RET_OP_EXECUTE_FAILURE",
    "RET_FORMAT_ERR",
    "RET_INFER_ERR",
    "RET_INFER_INVALID",
    "RET_INPUT_PARAM_INVALID",
    "GetErrorInfo", "LiteError", "GraphFileError", "NotSupportedError", "InvalidOpAttrError", "InputTensorError",
    "InferShapeError", "InferInvalidError", "ParamInvalidError", "OpExecuteError", "MemoryFailedError",
    "ReentrantError",
]

RET_OK = 0
RET_ERROR = -1
RET_NULL_PTR = -2
RET_PARAM_INVALID = -3
RET_NO_CHANGE = -4
RET_SUCCESS_EXIT = -5
RET_MEMORY_FAILED = -6
RET_NOT_SUPPORT = -7
RET_THREAD_POOL_ERROR = -8
RET_OUT_OF_TENSOR_RANGE = -100
RET_INPUT_TENSOR_ERROR = -101
RET_REENTRANT_ERROR = -102
RET_GRAPH_FILE_ERR = -200
RET_NOT_FIND_OP = -300
RET_INVALID_OP_NAME = -301
RET_INVALID_OP_ATTR = -302
RET_OP_EXECUTE_FAILURE = -303
RET_FORMAT_ERR = -400
RET_INFER_ERR = -500
RET_INFER_INVALID = -501
RET_INPUT_PARAM_INVALID = -600

_INFO = {
    RET_OK: "No error occurs.",
    RET_ERROR: "Common error code.",
    RET_NULL_PTR: "NULL pointer returned.",
    RET_PARAM_INVALID: "Invalid parameter.",
    RET_NO_CHANGE: "No change.",
    RET_SUCCESS_EXIT: "No error but exit.",
    RET_MEMORY_FAILED: "Fail to create memory.",
    RET_NOT_SUPPORT: "Fail to support.",
    RET_THREAD_POOL_ERROR: "Error occur in thread pool.",
    RET_OUT_OF_TENSOR_RANGE: "Failed to check range.",
    RET_INPUT_TENSOR_ERROR: "Failed to check input tensor.",
    RET_REENTRANT_ERROR: "Exist executor running.",
    RET_GRAPH_FILE_ERR: "Failed to verify graph file.",
    RET_NOT_FIND_OP: "Failed to find operator.",
    RET_INVALID_OP_NAME: "Invalid operator name.",
    RET_INVALID_OP_ATTR: "Invalid operator attr.",
    RET_OP_EXECUTE_FAILURE: "Failed to execute operator.",
    RET_FORMAT_ERR: "Failed to check tensor format.",
    RET_INFER_ERR: "Failed to infer shape.",
    RET_INFER_INVALID: "Invalid infer shape before runtime.",
    RET_INPUT_PARAM_INVALID: "Invalid input param by user.",
}


def GetErrorInfo(status: int) -> str:
    """The text MindSpore Lite gives for a status code."""
    return _INFO.get(status, "Unknown error code.")


class LiteError(Exception):
    """Any runtime or converter failure; `status` is the MindSpore Lite code, the message names the culprit."""

    status = RET_ERROR

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return f"{super().__str__()} [{self.status}: {GetErrorInfo(self.status)}]"


class GraphFileError(LiteError):
    """The model buffer is malformed, truncated or inconsistent."""
    status = RET_GRAPH_FILE_ERR


class NotSupportedError(LiteError):
    """An op, dtype or attribute combination this runtime has no kernel for."""
    status = RET_NOT_SUPPORT


class InferInvalidError(NotSupportedError):
    """A shape rule needs a value that is known only while running (MindSpore's RET_INFER_INVALID): the
    compiler runs such a node, and everything downstream of it, with run-time shape inference."""
    status = RET_INFER_INVALID


class InvalidOpAttrError(LiteError):
    """An op attribute is out of its valid range."""
    status = RET_INVALID_OP_ATTR


class InputTensorError(LiteError):
    """User input of the wrong shape, dtype or name."""
    status = RET_INPUT_TENSOR_ERROR


class InferShapeError(LiteError):
    """Shapes that do not fit an op's rule."""
    status = RET_INFER_ERR


class ParamInvalidError(LiteError):
    """An invalid argument to an API call."""
    status = RET_PARAM_INVALID


class OpExecuteError(LiteError):
    """A kernel failed while running."""
    status = RET_OP_EXECUTE_FAILURE


class ReentrantError(LiteError):
    """A session was called while it is running (from another thread, or from one of its own callbacks)."""
    status = RET_REENTRANT_ERROR


class MemoryFailedError(LiteError):
    """A tensor or arena too large to allocate."""
    status = RET_MEMORY_FAILED
