"""`benchmark_lite`'s data files, the first byte picking the kind: expected outputs (calibration text, `.npy`,
`.npz`) or the input file of a float input tensor (`--inDataFile`)."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.tensor import MSTensor
from lite.tools.benchmark import load_expected, read_input_file
from tests.fuzz.contract import contract
from tests.fuzz.scratch import scratch_file

SUFFIXES = (".txt", ".npy", ".npz", ".bin")
INPUT = MSTensor("input", DataType.FLOAT32, np.zeros((1, 2, 2, 3), np.float32))


def _read(data: bytes) -> None:
    """An expected-output file or an input file."""
    if not data:
        return
    suffix = SUFFIXES[data[0] % len(SUFFIXES)]
    with scratch_file(suffix, data[1:]) as path:
        if suffix == ".bin":
            read_input_file(path, INPUT)
        else:
            load_expected(path, ["output"])


TestOneInput = contract(_read)
