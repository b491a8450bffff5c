from converter.frontends.tflite.rules import activations, elementwise, nn, quant, tensor_ops  # noqa: F401
