"""ONNX protobufs through the ONNX frontend's importer."""
from tests.fuzz.frontends import importer

TestOneInput = importer("ONNX")
