"""ONNX importer rules: nn."""
