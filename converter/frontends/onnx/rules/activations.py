"""ONNX importer rules: activations."""
