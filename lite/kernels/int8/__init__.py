"""int8 kernels of fully quantized models (docs/quantization.md); importing this package registers them."""
from lite.kernels.int8 import (activation, arithmetic, conv2d, full_connection, pooling, quant_cast,  # noqa: F401
                               shape_ops)
