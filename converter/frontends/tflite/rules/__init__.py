from converter.frontends.tflite.rules import (activations, elementwise, index_ops, nn, quant,  # noqa: F401
                                                tensor_ops)
