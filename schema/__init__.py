"""Our `.ms` model format (file identifier MSPY; read and written by `lite.format.mspy`): `model.fbs` and the
Python code flatc generates from it."""
from schema import model_generated as fb

FILE_IDENTIFIER = b"MSPY"
FORMAT_VERSION = "1.3"    # 1.1: per-channel quantization in ChannelQuant; implied int32 bias params
                         # 1.2: fmk_type is MindSpore Lite's FmkType (older files wrote 0 for ONNX); bodies
                         # 1.3: weights of fewer than 8 bits bit-packed (Tensor.weight_quant_compress_type)
DATA_ALIGNMENT = 64      # const tensor bytes are aligned so the runtime can map them zero-copy
NO_TENSOR = 0xFFFFFFFF   # Node input index of an omitted optional input
# MetaGraph.fmk_type: the source framework, by MindSpore Lite's FmkType values
FMK_TYPES = {0: "TF", 1: "CAFFE", 2: "ONNX", 3: "MS", 4: "TFLITE"}
FMK_ONNX, FMK_TFLITE = 2, 4

__all__ = ["fb", "FILE_IDENTIFIER", "FORMAT_VERSION", "DATA_ALIGNMENT", "NO_TENSOR", "FMK_TYPES", "FMK_ONNX", "FMK_TFLITE"]
