"""MindSpore Lite's own `.ms` format (`MetaGraph`, file identifier "MSL2"): our schema of it and flatc's readers."""
from pathlib import Path

from schema.mindspore_lite import mindspore_lite_generated as fb

FBS = Path(__file__).resolve().with_name("mindspore_lite.fbs")
FILE_IDENTIFIER = b"MSL2"

__all__ = ["fb", "FBS", "FILE_IDENTIFIER"]
