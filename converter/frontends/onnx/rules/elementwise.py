"""ONNX importer rules: elementwise."""
