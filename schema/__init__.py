"""The `.ms` model format: `model.fbs` and the Python code flatc generates from it."""
from schema import model_generated as fb

FILE_IDENTIFIER = b"MSPY"
FORMAT_VERSION = "1.1"    # 1.1: per-channel quantization in ChannelQuant; implied int32 bias params
DATA_ALIGNMENT = 64      # const tensor bytes are aligned so the runtime can map them zero-copy
NO_TENSOR = 0xFFFFFFFF   # Node input index of an omitted optional input

__all__ = ["fb", "FILE_IDENTIFIER", "FORMAT_VERSION", "DATA_ALIGNMENT", "NO_TENSOR"]
