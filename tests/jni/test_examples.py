"""The Java API (`jni/`): built once per test session with `make -C jni`, then driven from Java — zoo models,
threads, a long run loop, misuse, the two examples — and checked against the Python session of this checkout.

The Java side of most checks is `jni/tests/JniCheck.java`; it reports what it saw and these tests judge it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lite
import models
from converter import convert, convert_for_training
from converter.train import TrainParams
from lite.train import load_mnist
from models.imagenet import class_names, load_photo, preprocess
from tests.util import MNIST, REPO, small_cnn

pytestmark = pytest.mark.skipif(shutil.which("javac") is None or shutil.which("java") is None,
                                reason="no JDK (javac and java) on PATH: install openjdk-17-jdk-headless")

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081        # as in jni/examples/TrainLeNet.java


class Build:
    """The built jar, library, examples and test driver."""

    def __init__(self, root: Path):
        self.root = root
        self.jar = root / "mindspore-lite-java.jar"
        self.library = root / "libmindspore-lite-jni.so"

    def run(self, main: str, *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None,
            python: str | None = sys.executable) -> subprocess.CompletedProcess:
        """Run a Java program with this checkout's Python package (by default; `env` replaces the environment,
        `python` names the interpreter by system property)."""
        classpath = os.pathsep.join(str(p) for p in (self.jar, self.root / "examples", self.root / "tests"))
        prop = [f"-Dmindspore.lite.python={python}"] if python else []
        command = ["java", *prop, "-cp", classpath, main, *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=cwd,
                              env=env if env is not None else {**os.environ, "PYTHONPATH": str(REPO)})

    def java(self, main: str, *args: str | Path, **kwargs) -> str:
        """`run`'s stdout (fails with its stderr)."""
        done = self.run(main, *args, **kwargs)
        assert done.returncode == 0, f"{' '.join(done.args)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="session")
def build(tmp_path_factory) -> Build:
    root = tmp_path_factory.mktemp("jni")
    done = subprocess.run(["make", "-C", str(REPO / "jni"), f"BUILD={root}", f"PYTHON={sys.executable}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"make -C jni failed:\n{done.stdout}\n{done.stderr}"
    done = subprocess.run(["javac", "--release", "11", "-cp", str(root / "mindspore-lite-java.jar"), "-d",
                           str(root / "tests"), str(REPO / "jni" / "tests" / "JniCheck.java")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return Build(root)


def python_outputs(path: Path, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(lite.Model.Load(path))
    for tensor, data in zip(session.GetInputs(), inputs):
        tensor.set_data(data)
    session.RunGraph()
    return {name: t.numpy() for name, t in session.GetOutputs().items()}


def write_case(folder: Path, name: str, buf: bytes, seed: int = 0) -> list[np.ndarray]:
    """`name.ms` and random inputs `name.in<k>.bin` of its input shapes and dtypes."""
    (folder / f"{name}.ms").write_bytes(buf)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(t.shape()).astype(t.MutableData().dtype) for t in session.GetInputs()]
    for k, data in enumerate(inputs):
        (folder / f"{name}.in{k}.bin").write_bytes(data.tobytes())
    return inputs


def java_outputs(folder: Path, name: str, variant: str) -> dict[str, bytes]:
    names = sorted(folder.glob(f"{name}.{variant}.name*.txt"))
    return {p.read_text(): (folder / p.name.replace(".name", ".out").replace(".txt", ".bin")).read_bytes()
            for p in names}


def assert_same_outputs(build: Build, folder: Path, cases: dict[str, list[np.ndarray]]) -> None:
    build.java("JniCheck", "run", folder)
    for name, inputs in cases.items():
        expected = python_outputs(folder / f"{name}.ms", inputs)
        for variant in ("arrays", "buffers"):
            got = java_outputs(folder, name, variant)
            assert list(got) == list(expected), (name, variant)
            for tensor, array in expected.items():
                assert got[tensor] == array.tobytes(), f"{name} ({variant}): output '{tensor}' differs"


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> tuple[Path, dict[str, list[np.ndarray]]]:
    folder = tmp_path_factory.mktemp("jni_zoo")
    cases = {
        "lenet5": write_case(folder, "lenet5", convert(models.build("lenet5"))),
        "mobilenet_v2": write_case(folder, "mobilenet_v2", convert(models.build("mobilenet_v2", input_size=64))),
        "small_cnn": write_case(folder, "small_cnn", convert(small_cnn(batch=2))),
    }
    return folder, cases


def test_zoo_outputs_equal_the_python_session_bit_for_bit(build, zoo):
    folder, cases = zoo
    assert_same_outputs(build, folder, cases)


def floats(text: str) -> np.ndarray:
    return np.array([np.float32(v) for v in text.strip("[]").split(", ")], np.float32)


def test_threads_with_own_sessions_and_one_shared_session(build, zoo, tmp_path):
    folder, _ = zoo
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((1, 1, 32, 32)).astype(np.float32) for _ in range(2))
    (tmp_path / "a.bin").write_bytes(a.tobytes())
    (tmp_path / "b.bin").write_bytes(b.tobytes())
    out = build.java("JniCheck", "threads", folder / "lenet5.ms", tmp_path / "a.bin", tmp_path / "b.bin", 40)
    own = re.search(r"own-session outputs (\[.*?\]) (\[.*?\])", out)
    for text, data in zip(own.groups(), (a, b)):
        np.testing.assert_array_equal(floats(text), python_outputs(folder / "lenet5.ms", [data])["logits"][0])
    assert "own-session changed 0" in out
    assert "shared-session wrong 0 failures 0" in out, out


def counters(out: str) -> dict[str, list[int]]:
    return {line.split()[0]: [int(v) for v in line.split()[1:]] for line in out.splitlines()}


def test_ten_thousand_runs_hold_no_more_handles_or_python_objects(build, zoo):
    folder, _ = zoo
    seen = counters(build.java("JniCheck", "leak", folder / "lenet5.ms", 10000))
    assert seen["runs"] == [10000]
    before, after = seen["handles"]
    assert after == before
    assert seen["freed"] == [before, before]              # 1000 getInputs() lists, each tensor freed
    assert seen["cleaned"][0] > before and seen["cleaned"][1] == before   # unfreed ones: the Cleaner's job
    objects, blocks = seen["objects"], seen["blocks"]
    assert objects[1] - objects[0] < 100, objects          # a leak per run would add >= 10000
    assert blocks[1] - blocks[0] < 1000, blocks


MISUSE = {
    "short-float-data": -101, "long-byte-data": -101, "int-data-on-float": -101, "long-data-on-float": -101,
    "get-int-of-float": -101, "swapped-byte-order": -3, "heap-buffer": "ok", "null-float-data": -3,
    "null-buffer": -3, "null-model": -3, "null-name": -3, "unknown-name": "ok", "null-config": -3,
    "null-path": -3, "null-resize": -3, "resize-rank": -101, "resize-count": -3, "bad-threads": -3,
    "bad-device": -3, "gpu-falls-back": "ok", "corrupt-file": -200, "missing-file": -200, "corrupt-buffer": -200,
    "train-inference-model": -7, "unloaded-model": -2, "uninitialised-config": -2, "freed-model": -2,
    "double-free-model": -2, "freed-tensor": -2, "freed-tensor-set": -2, "double-free-tensor": -2,
    "close-after-free": "ok", "freed-session-run": -2, "freed-session-inputs": -2, "double-free-session": -2,
    "tensor-after-session-free": "ok", "freed-config": -2,
}


def test_misuse_throws_lite_exceptions_with_the_status(build, zoo, tmp_path):
    folder, _ = zoo
    corrupt = tmp_path / "corrupt.ms"
    data = bytearray((folder / "lenet5.ms").read_bytes())
    data[:16] = b"\xff" * 16                     # root offset and file identifier overwritten
    corrupt.write_bytes(bytes(data))
    out = build.java("JniCheck", "misuse", folder / "lenet5.ms", corrupt)
    seen = {line.split()[0]: line.split()[1] for line in out.splitlines() if line and line.split()[0] in MISUSE}
    assert seen == {case: str(status) for case, status in MISUSE.items()}, out
    assert re.search(r"^short-float-data -101 tensor 'input' .* takes 1024 float32 values, got 1023", out, re.M)


def test_truncated_model_is_a_graph_file_error(build, zoo, tmp_path):
    folder, _ = zoo
    truncated = tmp_path / "truncated.ms"
    truncated.write_bytes((folder / "lenet5.ms").read_bytes()[:100])
    out = build.java("JniCheck", "misuse", folder / "lenet5.ms", truncated)
    assert re.search(r"^corrupt-file -200 ", out, re.M) and re.search(r"^corrupt-buffer -200 ", out, re.M)


LABELS = REPO / "models" / "imagenet_classes.txt"


def test_classify_image_example_prints_the_python_top5(build, zoo, tmp_path):
    folder, cases = zoo
    model = folder / "mobilenet_v2.ms"
    out = build.java("ClassifyImage", model, folder / "mobilenet_v2.in0.bin", LABELS)
    logits = python_outputs(model, cases["mobilenet_v2"])["logits"][0]
    top = re.findall(r"^top\d class (\d+) score (\S+) (.+)$", out, re.M)
    order = np.argsort(-logits, kind="stable")[:5]
    assert [int(c) for c, _, _ in top] == list(order)
    assert [np.float32(s) for _, s, _ in top] == list(logits[order])
    assert [name for _, _, name in top] == [class_names()[c] for c in order]

    from PIL import Image
    photo = tmp_path / "photo.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (80, 100, 3), dtype=np.uint8)).save(photo)
    assert len(re.findall(r"^top\d class \d+ score ", build.java("ClassifyImage", model, photo), re.M)) == 5


def test_classify_image_finds_the_default_labels_from_the_checkout_root(build, zoo):
    folder, _ = zoo
    out = build.java("ClassifyImage", folder / "mobilenet_v2.ms", folder / "mobilenet_v2.in0.bin", cwd=REPO)
    assert len(re.findall(r"^top\d class (\d+) score \S+ \S.*$", out, re.M)) == 5


def test_classify_image_names_the_real_photo_with_the_real_efficientnet_lite0(build, tmp_path):
    """The real EfficientNet-Lite0 (as the quickstart makes it) names the coffee photo's class in Java as the
    Python session does."""
    try:
        from models.pretrained import PretrainedUnavailable, pretrained
        onnx_model = pretrained("efficientnet_lite0")
    except (ImportError, PretrainedUnavailable) as e:
        pytest.skip(f"EfficientNet-Lite0's published weights are not installed: {e}")
    from PIL import Image
    model = tmp_path / "efficientnet_lite0.ms"
    model.write_bytes(convert(onnx_model))
    photo = tmp_path / "coffee.png"
    Image.fromarray(load_photo("coffee")).save(photo)
    top1 = re.search(r"^top1 class (\d+) score \S+ (.+)$", build.java("ClassifyImage", model, photo, LABELS), re.M)
    logits = python_outputs(model, [preprocess(load_photo("coffee"))])["logits"][0]
    assert int(top1.group(1)) == int(np.argmax(logits)) and top1.group(2) == class_names()[int(np.argmax(logits))]
    assert top1.group(2) in ("espresso", "cup", "coffee mug")


def test_classify_image_without_the_model_says_how_to_make_it(build, tmp_path):
    done = build.run("ClassifyImage", tmp_path / "efficientnet_lite0.ms", tmp_path / "photo.png")
    assert done.returncode == 2 and "examples/quickstart.py --keep" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Exception" not in done.stderr


def write_idx(path: Path, array: np.ndarray) -> None:
    """A plain (not compressed) uint8 IDX file: magic 0x0000 08 rank, big-endian dims, the bytes."""
    header = bytes([0, 0, 8, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def test_train_example_without_mnist_says_what_to_put_where_in_one_line(build, tmp_path):
    done = build.run("TrainLeNet", tmp_path / "lenet_train.ms", tmp_path / "no_mnist", tmp_path / "lenet.ms")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "train-images-idx3-ubyte" in done.stderr and "t10k-labels-idx1-ubyte" in done.stderr
    assert str(tmp_path / "no_mnist") in done.stderr and "Exception" not in done.stderr


def test_train_example_reads_plain_idx_files(build, tmp_path):
    """IDX files need not be gzip-compressed (as the Python reader takes them): a small synthetic set trains."""
    rng = np.random.default_rng(0)
    data = tmp_path / "mnist"
    data.mkdir()
    for prefix, n in (("train", 64), ("t10k", 1000)):
        write_idx(data / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        write_idx(data / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n))
    onnx_model = models.build("lenet5", num_classes=10, input_size=28, batch=32)
    train_model = tmp_path / "lenet_train.ms"
    train_model.write_bytes(convert_for_training(onnx_model, TrainParams(optimizer="adam", learning_rate=2e-3)))
    out = build.java("TrainLeNet", train_model, data, tmp_path / "lenet.ms")
    assert re.search(r"^step 2 loss \S+$", out, re.M) and re.search(r"^test accuracy 0\.\d+$", out, re.M)


def mnist_input(images: np.ndarray) -> np.ndarray:
    return ((images.astype(np.float32) / 255 - np.float32(MNIST_MEAN)) / np.float32(MNIST_STD))[:, None]


@pytest.mark.shared_data
@pytest.mark.skipif(not MNIST.is_dir(), reason="needs the real MNIST in ../shared/datasets/mnist")
def test_train_example_lowers_the_loss_and_its_export_runs_alike_in_java_and_python(build, tmp_path):
    onnx_model = models.build("lenet5", num_classes=10, input_size=28, batch=32)
    train_model = tmp_path / "lenet_train.ms"
    train_model.write_bytes(convert_for_training(onnx_model, TrainParams(optimizer="adam", learning_rate=2e-3)))
    exported = tmp_path / "exported" / "lenet.ms"
    exported.parent.mkdir()
    out = build.java("TrainLeNet", train_model, MNIST, exported, 100)
    loss = float(re.search(r"^step 100 loss (\S+)$", out, re.M).group(1))
    assert loss < 1.5, out                        # ln(10) = 2.30 before learning
    java_accuracy = float(re.search(r"^test accuracy (\S+)$", out, re.M).group(1))

    images, labels = load_mnist(MNIST, "test")
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(lite.Model.Load(exported))
    session.Resize(session.GetInputs(), [[len(labels), 1, 28, 28]])
    session.GetInputs()[0].set_data(mnist_input(images))
    session.RunGraph()
    accuracy = float(np.mean(session.GetOutputs()["logits"].MutableData().argmax(axis=1) == labels))
    assert accuracy > 0.7
    assert f"{accuracy:.4f}" == f"{java_accuracy:.4f}"

    inputs = write_case(exported.parent, "lenet", exported.read_bytes())
    assert_same_outputs(build, exported.parent, {"lenet": inputs})


def test_the_embedded_python_finds_the_installed_package_through_site(build, tmp_path):
    """Without PYTHONPATH, `lite` comes from wherever the interpreter's site-packages say (the editable install),
    and the interpreter is the one named by the system property."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    installed = subprocess.run([sys.executable, "-c", "import lite; print(lite.__file__)"], capture_output=True,
                               text=True, env=env, cwd=tmp_path, check=True).stdout.strip()
    out = build.java("JniCheck", "info", env=env, cwd=tmp_path)
    assert f"lite={installed}" in out
    assert f"executable={sys.executable}" in out


def test_the_interpreter_can_be_a_venv_named_by_the_environment(build, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    out = build.java("JniCheck", "info", env={**os.environ, "MSLITE_PYTHON": str(venv / "bin" / "python")},
                     python=None)
    assert f"executable={venv / 'bin' / 'python'} prefix={venv} " in out
