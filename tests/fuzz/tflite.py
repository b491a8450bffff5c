"""TFLite flatbuffers (reader, signatures, resource variables) through the TFLITE frontend's importer."""
from tests.fuzz.frontends import importer

TestOneInput = importer("TFLITE")
