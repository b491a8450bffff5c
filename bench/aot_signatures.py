"""Whether the ahead-of-time library's `signatures.txt` covers every compiled-kernel call of the zoo and the wild
bench: each model, float and quantized (static int8 PTQ, DYNAMIC_QUANT, onnxruntime's QDQ), runs once with
numba's JIT at 1 and 2 threads while its calls are recorded (`lite.kernels.compiled.aot.build.recorded`); the
entries the file lacks are listed and the exit status is 1.

    python bench/aot_signatures.py [--write] [--models mobilenet_v2,text_encoder,...]

`--write` appends the missing entries to `signatures.txt` instead (its format: one `module.function:form:types`
a line). Wild models whose package is not installed are left out, and said so. Minutes: every model is converted
(and quantized) first.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CALIBRATION = 2
FREE_DIM = 128       # a free image side (tiny_yolo's)
INT8 = ("lenet5", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_lite0", "resnet18", "tiny_yolo")
DYNAMIC = ("text_encoder", "kws_lstm", "kws_gru", "crnn")
QDQ = ("mobilenet_v2", "resnet18")      # also as onnxruntime's quantize_static writes them (its own rounding)


def zoo_model(name: str, input_size: int | None = None) -> Any:
    """Zoo model `name`, image classifiers at `input_size` (default: their builder's)."""
    import models
    if name == "text_encoder":
        from models.text import text_encoder
        return text_encoder(batch=1)[1]
    return models.build(name, **({"input_size": input_size} if input_size and name in models.ZOO else {}))


def zoo_names() -> list[str]:
    import models
    return [*models.ZOO, *models.TASKS, *models.SEQUENCE, "text_encoder"]


def shapes(model: Any) -> dict[str, list[int]]:
    """Every graph input's shape, a free batch at 1 and other free dims at FREE_DIM."""
    return {i.name: [d.dim_value or (FREE_DIM if k else 1) for k, d in enumerate(i.type.tensor_type.shape.dim)]
            for i in model.graph.input}


def static_int8(model: Any) -> bytes:
    """Our MAX_MIN PTQ of `model` (as bench_inference quantizes), calibrated on random floats."""
    from converter import to_graph
    from converter.export import to_bytes
    from converter.quant import QuantConfig, quantize
    given = shapes(model)
    rng = np.random.default_rng(0)
    samples = [{name: rng.standard_normal(shape).astype(np.float32) for name, shape in given.items()}
               for _ in range(CALIBRATION)]
    return to_bytes(quantize(to_graph(model, given), QuantConfig(method="MAX_MIN"), samples))


def onnxruntime_qdq(model: Any) -> bytes:
    """onnxruntime's `quantize_static` QDQ form of `model` (int8, weights per channel), calibrated on random
    floats, converted: its convolutions requantize by onnxruntime's rule, which has kernels of its own."""
    import onnx
    from onnxruntime import quantization

    from converter import convert
    given = shapes(model)
    rng = np.random.default_rng(0)
    samples = iter([{name: rng.standard_normal(shape).astype(np.float32) for name, shape in given.items()}
                    for _ in range(CALIBRATION)])

    class Samples(quantization.CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(samples, None)

    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        onnx.save(model, source)
        quantization.quantize_static(source, target, Samples(), per_channel=True,
                                     quant_format=quantization.QuantFormat.QDQ,
                                     activation_type=quantization.QuantType.QInt8,
                                     weight_type=quantization.QuantType.QInt8)
        return convert(onnx.load(target), given)


def dynamic_int8(model: Any) -> bytes:
    from converter.quant import DYNAMIC_QUANT, QuantConfig, convert_quantized
    return convert_quantized(model, QuantConfig(quant_type=DYNAMIC_QUANT))


def files(names: list[str], folder: Path,
          input_size: int | None = None) -> tuple[list[str], dict[str, dict[str, np.ndarray]], list[str]]:
    """(the .ms files of `names` (zoo classifiers at `input_size`), their feeds by file, what was left out and
    why)."""
    import bench_wild
    from converter import convert
    from lite.status import LiteError
    paths, feeds, skipped = [], {}, []

    def add(label: str, make: Callable[[], bytes], feed: dict[str, np.ndarray] | None = None) -> None:
        path = folder / f"{label}.ms"
        path.write_bytes(make())
        paths.append(str(path))
        if feed:
            feeds[str(path)] = feed
        print(f"  {label}", flush=True)

    for name in names:
        if name in bench_wild.MODELS:
            wild = bench_wild.MODELS[name]
            if wild.file() is None:
                skipped.append(f"{name} ({wild.package} not installed)")
                continue
            try:
                add(name, lambda: bench_wild.convert_ours(wild, bench_wild.source(wild, 1), 1), wild.feeds(1))
            except LiteError as e:                 # Basic Pitch's .tflite: bench/results/wild.md
                skipped.append(f"{name} (not converted: {str(e).splitlines()[0][:120]})")
            continue
        model = zoo_model(name, input_size)
        add(name, lambda: convert(model, shapes(model)))
        if name in INT8:
            add(f"{name}_int8", lambda: static_int8(model))
        if name in DYNAMIC:
            add(f"{name}_dynamic", lambda: dynamic_int8(model))
        if name in QDQ:
            add(f"{name}_qdq", lambda: onnxruntime_qdq(model))
    return paths, feeds, skipped


def main(argv: list[str] | None = None) -> int:
    import bench_wild
    from lite.kernels.compiled.aot import build
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join([*zoo_names(), *bench_wild.MODELS]),
                        help="comma-separated zoo and wild-bench names (default: all)")
    parser.add_argument("--write", action="store_true", help="append the missing entries to signatures.txt")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        paths, feeds, skipped = files(args.models.split(","), Path(tmp))
        lacking = build.missing(build.recorded(paths, feeds))
    for what in skipped:
        print(f"left out: {what}")
    if args.write:
        build.append(lacking)
        print(f"{len(lacking)} entries added to {build.SIGNATURES}")
        return 0
    print("\n".join([f"{len(lacking)} entries missing from {build.SIGNATURES}:", *lacking]) if lacking else
          f"every entry of {len(paths)} models is in {build.SIGNATURES}")
    return 1 if lacking else 0


if __name__ == "__main__":
    sys.exit(main())
