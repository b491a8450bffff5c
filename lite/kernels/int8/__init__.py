"""int8 kernels of fully quantized models (docs/quantization.md); importing this package registers them."""
