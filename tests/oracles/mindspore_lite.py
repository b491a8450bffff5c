"""The official MindSpore Lite 2.0.0 converter and runtime as a test oracle for its `.ms` (MSL2) files.

Built on `bench/mindspore_lite_peer/` (the wheel fetched from PyPI, a small C++ program compiled against its
libraries, all in the user's cache). Converted files are cached there too, keyed by the ONNX file's bytes and the
conversion's arguments, so a test converts a model once per machine. Whatever cannot be had here raises
`Unavailable` with the reason; `require()` turns that into a pytest skip.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench.mindspore_lite_peer import peer

Unavailable = peer.Unavailable


def require() -> Path:
    """The built peer program, or a pytest skip saying why the official tools are unavailable here."""
    import pytest
    try:
        return peer.binary()
    except Unavailable as e:
        pytest.skip(f"official MindSpore Lite {peer.VERSION} unavailable: {e}")


def acceptable(model_bytes: bytes) -> bytes:
    """The ONNX model as the 2.0.0 converter accepts it: it refuses any `dilations` attribute of a pooling node
    ("pooling op not support dilations now"), even all ones, which PyTorch's exporter writes and which change
    nothing; those are dropped."""
    import onnx
    model = onnx.load_from_string(model_bytes)
    changed = False
    for node in model.graph.node:
        if node.op_type in ("MaxPool", "AveragePool"):
            for attr in list(node.attribute):
                if attr.name == "dilations" and all(d == 1 for d in attr.ints):
                    node.attribute.remove(attr)
                    changed = True
    return model.SerializeToString() if changed else model_bytes


def convert(onnx_path: Path, input_name: str, shape: tuple[int, ...], input_format: str = "NHWC",
            weight_bits: int = 0, calibration: np.ndarray | None = None) -> Path:
    """The official converter's `.ms` of an ONNX model (cached): input `input_name` fixed to `shape` (as the ONNX
    model lays it out) and given to the `.ms` model in `input_format` (NHWC is the converter's default).

    With `weight_bits` the weights of 16 or more channels are quantized to that many bits (WEIGHT_QUANT). With
    `calibration` (float32 samples stacked on a first axis, each as the `.ms` model takes its input) the model is
    fully quantized to int8 (FULL_QUANT, the converter's default MAX_MIN ranges and bias correction), calibrated
    on those samples: each is one raw `.bin` file of the calibration folder (`input_type=BIN`)."""
    program = peer.binary()
    data = acceptable(Path(onnx_path).read_bytes())
    samples = b"" if calibration is None else np.ascontiguousarray(calibration, np.float32).tobytes()
    key = hashlib.sha256(data + samples + repr((input_name, tuple(shape), input_format, weight_bits)).encode()
                         ).hexdigest()[:16]
    out = peer.cache() / peer.VERSION / "converted" / f"{key}.ms"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        source = Path(tmp) / "model.onnx"
        source.write_bytes(data)
        config = Path(tmp) / "quant.cfg"
        if weight_bits:
            config.write_text(f"[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num={weight_bits}\n"
                              "min_quant_weight_size=0\nmin_quant_weight_channel=16\n")
        elif calibration is not None:
            folder = Path(tmp) / "calibration"
            folder.mkdir()
            for k, sample in enumerate(np.asarray(calibration, np.float32)):
                np.ascontiguousarray(sample).tofile(folder / f"{k}.bin")
            config.write_text(f"[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n\n"
                              f"[data_preprocess_param]\ncalibrate_path={input_name}:{folder}\n"
                              f"calibrate_size={len(calibration)}\ninput_type=BIN\n")
        made = peer.convert(program, source, input_name, tuple(shape), "MINDIR_LITE", input_format,
                            prefix=Path(tmp) / key, config=config if config.exists() else None)
        os.chmod(made, 0o644)
        os.replace(made, out)    # whole, so a half-written file is never taken for a converted one
    return out


def run(ms_path: Path, x: np.ndarray) -> bytes:
    """The official runtime's outputs for the one input `x` of an `.ms` model (of the type the model takes): their
    raw bytes, one after the other in the model's output order (`as_arrays` splits them)."""
    program = peer.binary()
    x = np.ascontiguousarray(x)
    with tempfile.TemporaryDirectory() as tmp:
        x_path, y_path = Path(tmp) / "x.bin", Path(tmp) / "y.bin"
        x.tofile(x_path)
        result = subprocess.run(peer.run_argv(program, str(ms_path), x_path, x.shape, 0, 0, y_path),
                                capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"official runtime failed on {ms_path}: {peer.last_line(result.stderr)}")
        return y_path.read_bytes()


def as_arrays(raw: bytes, like: list[np.ndarray]) -> list[np.ndarray]:
    """`run`'s bytes as arrays of the shapes and types of `like` (the same model's outputs from elsewhere)."""
    sizes = [a.nbytes for a in like]
    if sum(sizes) != len(raw):
        raise ValueError(f"the official outputs hold {len(raw)} bytes, {sum(sizes)} expected")
    starts = np.cumsum([0, *sizes])
    return [np.frombuffer(raw[a:b], like_k.dtype).reshape(like_k.shape)
            for a, b, like_k in zip(starts[:-1], starts[1:], like)]
