from converter.frontends.tflite.rules import (activations, control_flow, elementwise, index_ops, logic,  # noqa: F401
                                              math, mediapipe, mediapipe_transforms, nn, quant, recurrent,
                                              scatter, tensor_ops)
