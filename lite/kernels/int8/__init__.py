"""int8 kernels of fully quantized models (docs/quantization.md), one module per op family; `lite.kernels.MODULES`
imports each when its op is looked up."""
