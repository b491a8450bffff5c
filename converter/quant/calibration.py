"""Calibration data and the float runs that feed the observers.

Inputs come from the config's folders: `.bin` files of raw float32 of exactly the input's byte size
(MindSpore's convention), `.npy` arrays of the input's size, or images (`input_type=IMAGE`: resized,
normalised, laid out as the input). Files are taken in name order; with several inputs the i-th files go together.
"""
from __future__ import annotations

import os
from typing import Callable, Iterable

import numpy as np

from converter.export import to_bytes
from converter.ir import Graph
from converter.quant.config import QuantConfig
from converter.quant.observers import Observer, make_observer
from converter.quant.progress import Progress
from lite import Context, LiteSession, MSTensor
from lite.status import ParamInvalidError
from lite.traits import traits
from schema import fb

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


def input_shape(graph: Graph, name: str) -> tuple[int, ...]:
    """A graph input's shape with unknown dims taken as 1 (calibration runs one sample at a time)."""
    return tuple(1 if d < 0 else d for d in graph.values[name].shape)


def load_bin(path: str, shape: tuple[int, ...]) -> np.ndarray:
    expected = int(np.prod(shape)) * 4
    size = os.path.getsize(path)
    if size != expected:
        raise ParamInvalidError(f"calibration file '{path}' has {size} bytes, but input shape {list(shape)} "
                                f"of float32 needs {expected}")
    return np.fromfile(path, np.float32).reshape(shape)


def load_npy(path: str, shape: tuple[int, ...]) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ParamInvalidError(f"calibration file '{path}' is not a readable .npy array: {e}") from None
    if array.size != int(np.prod(shape)):
        raise ParamInvalidError(f"calibration file '{path}' holds {array.size} values, but input shape "
                                f"{list(shape)} needs {int(np.prod(shape))}")
    return array.astype(np.float32).reshape(shape)


def load_image(path: str, shape: tuple[int, ...], cfg: QuantConfig) -> np.ndarray:
    """RGB image -> resized (config or input size), (x - mean) / std, NCHW or NHWC as the input's shape says."""
    from PIL import Image
    nchw = len(shape) == 4 and shape[1] in (1, 3) and shape[-1] not in (1, 3)
    h, w = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
    channels = shape[1] if nchw else shape[-1]
    try:
        image = Image.open(path).convert("RGB" if channels == 3 else "L")
    except OSError as e:
        raise ParamInvalidError(f"calibration image '{path}' cannot be read: {e}") from None
    image = image.resize((cfg.resize_width or w, cfg.resize_height or h), Image.BILINEAR)
    x = np.asarray(image, np.float32).reshape(image.height, image.width, channels)
    if (x.shape[0], x.shape[1]) != (h, w):
        raise ParamInvalidError(f"calibration image '{path}' resized to {x.shape[1]}x{x.shape[0]} does not fit "
                                f"input shape {list(shape)}")
    if cfg.normalize_mean:
        x = x - np.asarray(cfg.normalize_mean, np.float32)
    if cfg.normalize_std:
        x = x / np.asarray(cfg.normalize_std, np.float32)
    x = x.transpose(2, 0, 1) if nchw else x
    return x.reshape(shape).astype(np.float32)


def load_file(path: str, shape: tuple[int, ...], cfg: QuantConfig) -> np.ndarray:
    if cfg.input_type == "IMAGE":
        return load_image(path, shape, cfg)
    return load_npy(path, shape) if path.endswith(".npy") else load_bin(path, shape)


def load_calibration(graph: Graph, cfg: QuantConfig) -> list[dict[str, np.ndarray]]:
    """The calibration samples named by the config, one dict {input name: array} per sample."""
    paths = dict(cfg.calibrate_path)
    if not paths:
        raise ParamInvalidError("calibrate_path (or image_path) is required for PostTraining quantization")
    if "" in paths:
        if len(graph.inputs) != 1:
            raise ParamInvalidError(f"calibrate_path must name each of the inputs {graph.inputs} (input:dir)")
        paths = {graph.inputs[0]: paths[""]}
    missing = [name for name in graph.inputs if name not in paths]
    unknown = [name for name in paths if name not in graph.inputs]
    if missing or unknown:
        raise ParamInvalidError(f"calibrate_path names {sorted(paths)}, but the model's inputs are {graph.inputs}")
    files = {}
    for name, folder in paths.items():
        suffixes = IMAGE_SUFFIXES if cfg.input_type == "IMAGE" else (".bin", ".npy")
        found = sorted(f for f in os.listdir(folder) if f.lower().endswith(suffixes))
        if not found:
            raise ParamInvalidError(f"calibrate_path: calibration folder '{folder}' has no "
                                    f"{'/'.join(suffixes)} files")
        files[name] = [os.path.join(folder, f) for f in found[:cfg.calibrate_size]]
    count = min(len(v) for v in files.values())
    return [{name: load_file(files[name][i], input_shape(graph, name), cfg) for name in graph.inputs}
            for i in range(count)]


def session_for(graph: Graph, threads: int = 2) -> LiteSession:
    buf = to_bytes(graph)
    return LiteSession.CreateSession(buf, len(buf), Context(thread_num=threads))


def feed(session: LiteSession, sample: dict[str, np.ndarray]) -> None:
    """Set the session's inputs (resizing when a sample's shape differs)."""
    tensors = {name: session.GetInputsByTensorName(name) for name in sample}
    changed = [n for n, t in tensors.items() if t.shape() != list(sample[n].shape)]
    if changed:
        session.Resize([tensors[n] for n in changed], [list(sample[n].shape) for n in changed])
    for name, array in sample.items():
        tensors[name].set_data(np.ascontiguousarray(array, tensors[name].MutableData().dtype))


def run_samples(session: LiteSession, samples: Iterable[dict[str, np.ndarray]],
                visit: Callable[[str, np.ndarray], None], what: str = "calibrating",
                sample_done: Callable[[], None] | None = None) -> None:
    """Run every sample; `visit(name, array)` sees each graph input and each node output once per sample
    (arrays are the session's: copy what must outlive the callback); `sample_done()` follows each sample;
    progress is shown as `what: i/n` with the time left unless `what` is empty."""
    samples = list(samples)
    bar = Progress(what, len(samples)) if what else None

    def after(ins: list[MSTensor], outs: list[MSTensor], _param) -> bool:
        for t in outs:
            visit(t.tensor_name(), t.MutableData())
        return True

    for sample in samples:
        feed(session, sample)
        for name, array in sample.items():
            visit(name, array)
        session.RunGraph(after=after)
        if sample_done is not None:
            sample_done()
        if bar is not None:
            bar.step()


def unclipped(graph: Graph) -> set[str]:
    """Activations that keep their observed extremes whatever the method: graph outputs (clipping logits
    saturates the largest, deciding values) and outputs of a RELU6 clamp (bounded by design; values saturated
    at 6 are information that a histogram's shape does not weigh)."""
    bounded = {n.outputs[0] for n in graph.nodes if n.outputs and (
        n.attrs.get("activation") == fb.ActivationType.RELU6
        or (n.op == "Activation" and n.attrs.get("type") == fb.ActivationType.RELU6))}
    return bounded | set(graph.outputs)


def calibrate(graph: Graph, samples: list[dict[str, np.ndarray]], method: str, bits: int,
              row_max_floors: dict[str, float] | None = None,
              outputs: list[dict[str, np.ndarray]] | None = None) -> dict[str, Observer]:
    """Run the float graph on every sample; one observer per float activation (graph inputs and node outputs).
    `row_max_floors`, when given, gets each Softmax input's smallest row maximum along its axis
    (`full_quant.softmax_input_ranges` reads it); `outputs`, when given, gets each sample's graph outputs (as
    `debug.graph_outputs` gives them: the float reference that later choices are scored against, without a run
    of its own)."""
    observers: dict[str, Observer] = {}
    keep = unclipped(graph)
    axes = {n.inputs[0]: n.attrs["axis"] for n in graph.nodes if n.op == "Softmax" and n.inputs}
    produced: dict[str, np.ndarray] = {}

    def visit(name: str, array: np.ndarray) -> None:
        if outputs is not None and name in graph.outputs:
            produced[name] = array.copy()
        if array.dtype == np.float32:
            observers.setdefault(name, make_observer("MAX_MIN" if name in keep else method, bits)).update(array)
            if row_max_floors is not None and name in axes and array.size:
                floor = float(array.max(axis=axes[name]).min())
                row_max_floors[name] = min(row_max_floors.get(name, floor), floor)

    def sample_done() -> None:
        if outputs is not None:
            outputs.append({name: produced[name] for name in graph.outputs})

    run_samples(session_for(graph), samples, visit, sample_done=sample_done)
    return observers


def shared_ranges(graph: Graph, ranges: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """`ranges` with the input of every same-quant op (pooling, reshape, pad, transpose) widened to cover its
    output's range, up whole chains: in int8 the output reuses its input's parameters, so the input's range
    decides both. A max pool passes on its input's largest values, the tail a clipping method weighs least in
    the input's histogram: KL clipped LeNet-5's first ReLU at 4.21 where its max pool's own threshold is 5.57,
    and the logit SQNR fell from 40 to 29 dB."""
    out = dict(ranges)
    for node in reversed(graph.topological()):
        if not traits(node.op).same_quant or not node.inputs or not node.outputs:
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if src in out and dst in out:
            out[src] = (min(out[src][0], out[dst][0]), max(out[src][1], out[dst][1]))
    return out


def channel_ranges(graph: Graph, samples: list[dict[str, np.ndarray]],
                   names: set[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-channel (last axis) minimum and maximum of the float activations `names` over the samples."""
    ranges: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def visit(name: str, array: np.ndarray) -> None:
        if name in names and array.dtype == np.float32 and array.size:
            flat = array.reshape(-1, array.shape[-1])
            lo, hi = flat.min(axis=0).astype(np.float64), flat.max(axis=0).astype(np.float64)
            old = ranges.get(name)
            ranges[name] = (lo, hi) if old is None else (np.minimum(old[0], lo), np.maximum(old[1], hi))

    run_samples(session_for(graph), samples, visit, "channel ranges")
    return ranges
