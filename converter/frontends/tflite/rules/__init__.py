from converter.frontends.tflite.rules import (activations, elementwise, index_ops, logic, math, nn,  # noqa: F401
                                              quant, scatter, tensor_ops)
