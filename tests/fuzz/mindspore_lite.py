"""MindSpore Lite's own `.ms` files: the same entry point as ours (`lite.Model.Import` picks the reader by the
file identifier), fed its own corpus so that the fuzzer starts inside `lite.format.mindspore_lite`."""
from tests.fuzz.ms import TestOneInput

__all__ = ["TestOneInput"]
