"""Coverage-guided fuzz harnesses of every file the runtime and converter read (see docs/fuzzing.md).

Each harness module has `TestOneInput(data: bytes)`, built by `tests.fuzz.contract.contract`: the reader may end
in a `LiteError` (the promise to users: bad input is refused with a status) and nothing else, and no input may run
past the time bound. The memory bound is the runner's (`tests.fuzz.run`: RLIMIT_AS), so an over-allocation surfaces as a
`MemoryError`, which escapes like any other fault.
This package imports nothing of the project, so that the runner can instrument `lite` and `converter` as they
are first imported.
"""
__all__ = ["HARNESSES"]

HARNESSES = ("ms", "mindspore_lite", "mindir", "tflite", "onnx", "config", "benchmark", "federated")
