"""MINDIR protobufs through the MINDIR frontend's importer."""
from tests.fuzz.frontends import importer

TestOneInput = importer("MINDIR")
