"""ONNX importer rules for quantized models: QuantizeLinear, DequantizeLinear, QLinear*, *Integer."""
