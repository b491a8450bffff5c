"""The ahead-of-time kernel library (lite/kernels/compiled/aot): built by its documented command for a small CNN,
it runs the compiled kernels in a process that never imports numba or llvmlite, serial and threaded, within
float32 rounding of onnxruntime; what it lacks runs on the JIT; a missing or stale library is refused with a
reason. Every run that loads a library is a fresh process (a loaded library adds its thread pool to the
process)."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from converter import convert
from tests.util import REPO, run_ort

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="building needs numba"),
              pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                 reason="building needs a C compiler")]

SHAPE = (1, 16, 48, 48)      # every layer has work enough for the threaded forms (`compiled.PARALLEL_WORK`)


def cnn() -> onnx.ModelProto:
    """Conv 1x1 + Relu -> MaxPool 3x3 -> GlobalAveragePool -> Flatten -> Gemm: the compiled GEMM, windowed and
    global pooling."""
    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((32, 16, 1, 1)) * 0.3, "b": rng.standard_normal(32) * 0.1,
               "fc_w": rng.standard_normal((10, 32)) * 0.3, "fc_b": rng.standard_normal(10) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (1, 10))],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSLITE_", "NUMBA_"))}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def python(code: str, cwd: Path = REPO, **env: str) -> dict:
    """Run `code` in a fresh interpreter in `cwd` (its last stdout line is JSON), with no first-use build unless
    `env` asks for one."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                            env=clean_env(**{"MSLITE_AOT_BUILD": "0", "PYTHONPATH": str(cwd), **env}), cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the CNN (`cnn.ms`), its input and onnxruntime's output, and `lib/`: the library of just the
    CNN's signatures, built by the documented command."""
    folder = tmp_path_factory.mktemp("aot")
    model = cnn()
    (folder / "cnn.ms").write_bytes(convert(model))
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    np.save(folder / "x.npy", x)
    np.save(folder / "expected.npy", run_ort(model, {"x": x})["y"])
    subprocess.run([sys.executable, "-m", "lite.kernels.compiled.aot.build", "--models", str(folder / "cnn.ms"),
                    "--out", str(folder / "lib")], check=True, timeout=900, env=clean_env(), cwd=REPO,
                   capture_output=True)
    return folder


RUN = """
import json, sys, threading
import numpy as np
import lite
from lite.kernel import describe_backend

folder = sys.argv[1] if len(sys.argv) > 1 else {folder!r}
x, expected = np.load(folder + "/x.npy"), np.load(folder + "/expected.npy")
model = lite.Model.Load(folder + "/cnn.ms")

def run(threads, mode={mode!r}):
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=threads, kernels=mode))
    session.CompileGraph(model)
    compiled = [step.node.op for step in session._plan.steps if step.kernel.compiled]
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    y = next(iter(session.GetOutputs().values())).numpy().copy()
    return float(np.abs(y - expected).max() / np.abs(expected).max()), compiled

errors, compiled = zip(*(run(t) for t in (1, 2)))
concurrent = []                            # two sessions launching threaded kernels at once
workers = [threading.Thread(target=lambda: concurrent.extend(run(2)[0] for _ in range(5))) for _ in range(2)]
for w in workers: w.start()
for w in workers: w.join()
print(json.dumps({{"errors": errors, "concurrent": max(concurrent), "compiled": compiled,
                  "numba": sys.modules.get("numba") is not None, "llvmlite": "llvmlite" in sys.modules,
                  "describe": describe_backend({mode!r})}}))
"""


def test_the_library_runs_the_compiled_kernels_without_numba(built: Path) -> None:
    result = python(RUN.format(folder=str(built), mode="aot"), MSLITE_AOT_DIR=str(built / "lib"))
    assert max(result["errors"]) < 1e-5 and result["concurrent"] < 1e-5, result
    assert all(set(ops) >= {"Conv2D", "Pooling"} for ops in result["compiled"]), result["compiled"]
    assert not result["numba"] and not result["llvmlite"], "the library imported numba or llvmlite"
    assert "ahead of time" in result["describe"], result["describe"]


def test_auto_takes_the_library_first(built: Path) -> None:
    result = python(RUN.format(folder=str(built), mode="auto"), MSLITE_AOT_DIR=str(built / "lib"))
    assert max(result["errors"]) < 1e-5 and not result["numba"], result


def without_windowed_pooling(built: Path, tmp_path: Path) -> Path:
    """A copy of the built library whose entry points leave out the windowed pooling's."""
    lib = tmp_path / "lib"
    shutil.copytree(built / "lib", lib)
    info_path = next(lib.glob("*.json"))
    info = json.loads(info_path.read_text())
    info["entries"] = {k: v for k, v in info["entries"].items() if ".pool_f32:" not in k}
    info_path.write_text(json.dumps(info))
    return lib


def test_what_the_library_lacks_runs_on_the_jit(built: Path, tmp_path: Path) -> None:
    lib = without_windowed_pooling(built, tmp_path)
    result = python(RUN.format(folder=str(built), mode="aot"), MSLITE_AOT_DIR=str(lib))
    assert max(result["errors"]) < 1e-5 and result["numba"], result
    assert all(ops.count("Pooling") == 2 for ops in result["compiled"]), result["compiled"]   # max, global


NO_NUMBA = "import sys; sys.modules['numba'] = None\n"      # numba unimportable in the process


@pytest.mark.parametrize("mode", ["aot", "auto"])
def test_without_numba_what_the_library_lacks_runs_on_numpy(built: Path, tmp_path: Path, mode: str) -> None:
    """The node whose entry is missing runs its numpy kernel, the others the library's; the session works."""
    lib = without_windowed_pooling(built, tmp_path)
    result = python(NO_NUMBA + RUN.format(folder=str(built), mode=mode), MSLITE_AOT_DIR=str(lib))
    assert max(result["errors"]) < 1e-5 and result["concurrent"] < 1e-5, result
    assert all("Conv2D" in ops and ops.count("Pooling") == 1 for ops in result["compiled"]), result["compiled"]
    assert not result["numba"] and not result["llvmlite"], result


FIRST_USE = """
import json, sys
import numpy as np
import lite
from lite.kernels.compiled import aot
from lite.kernels.compiled.aot import first_use

folder = {folder!r}
session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
session.CompileGraph(lite.Model.Load(folder + "/cnn.ms"))
session.GetInputs()[0].set_data(np.load(folder + "/x.npy"))
session.RunGraph()
y, expected = next(iter(session.GetOutputs().values())).numpy(), np.load(folder + "/expected.npy")
print(json.dumps({{"error": float(np.abs(y - expected).max() / np.abs(expected).max()), "describe": aot.describe(),
                  "numba": "numba" in sys.modules, "cache": str(aot.cache_dir()),
                  "started": (aot.cache_dir() / first_use.LOCK).exists()}}))
"""


def test_the_first_process_builds_the_library_for_the_next_when_it_exits(built: Path, tmp_path: Path) -> None:
    """With no library anywhere, the first process runs on the JIT, with no build beside it, and starts the build
    in the background when it exits; once that is done the next process runs the library without numba."""
    from lite.kernels.compiled.aot import first_use
    keys = tmp_path / "signatures.txt"                   # the CNN's signatures only: a short build
    keys.write_text("\n".join(json.loads(next((built / "lib").glob("*.json")).read_text())["entries"]) + "\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "MSLITE_AOT_SIGNATURES": str(keys), "MSLITE_AOT_BUILD": "",
           "MSLITE_AOT_BUILD_NICE": "0"}                 # at the lowest priority it would wait for a quiet machine
    snapshot = tmp_path / "src"                          # kernel sources that no one edits between the processes
    shutil.copytree(REPO / "lite", snapshot / "lite")
    first = python(FIRST_USE.format(folder=str(built)), snapshot, **env)
    assert first["error"] < 1e-5 and first["numba"], first
    assert "when this process exits" in first["describe"] and not first["started"], first
    cache = Path(first["cache"])
    assert cache.parent.parent == tmp_path / "cache" / "mslite", cache
    assert (cache / first_use.LOCK).exists(), "no build started when the first process exited"
    first_use.wait(cache)
    second = python(FIRST_USE.format(folder=str(built)), snapshot, **env)
    assert second["error"] < 1e-5 and not second["numba"], second
    assert "ahead of time" in second["describe"], second


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="the kernel does not group sessions")
def test_the_build_yields_the_cpu_to_other_sessions() -> None:
    """The build runs in a session of its own, which Linux schedules as a group of its own where nice alone does
    not lower its share: its group is lowered too."""
    code = ("import json; from lite.kernels.compiled.aot import first_use; first_use.lower_priority(); "
            "import os; print(json.dumps([os.nice(0), open('/proc/self/autogroup').read()]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                            env=clean_env(), start_new_session=True)
    nice, group = json.loads(result.stdout.splitlines()[-1])
    assert nice == 19 and group.split()[-1] == "19", (nice, group)


def test_no_first_use_build_without_its_tools(tmp_path: Path) -> None:
    code = ("import json; from pathlib import Path; from lite.kernels.compiled.aot import first_use; "
            "print(json.dumps([first_use.start(Path('{0}') / 'a'), Path('{0}', 'a').exists()]))")
    told, made = python(NO_NUMBA.replace("numba'] = None", "llvmlite'] = None") + code.format(tmp_path),
                        MSLITE_AOT_BUILD="")
    assert "llvmlite not installed" in told and not made
    told, made = python(code.format(tmp_path), MSLITE_AOT_BUILD="0")
    assert "MSLITE_AOT_BUILD=0" in told and not made
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "build.log").write_text("error: cc failed")      # a build that ended without a library
    told, _ = python(code.format(tmp_path), MSLITE_AOT_BUILD="")
    assert "ended without a library" in told, told


def test_one_build_at_a_time_per_cache(tmp_path: Path) -> None:
    """While a build of other kernel sources holds the cache's lock, none starts for these."""
    from lite.kernels.compiled.aot import first_use
    cache = tmp_path / "kernels"
    cache.mkdir()
    held = first_use._locked(cache / first_use.LOCK)
    try:
        code = ("import json; from pathlib import Path; from lite.kernels.compiled.aot import first_use; "
                f"print(json.dumps(first_use.start(Path({str(cache / 'a')!r}))))")
        told = python(code, MSLITE_AOT_BUILD="")
    finally:
        os.close(held)
    assert "other kernel sources runs" in told and not (cache / "a" / first_use.LOG).exists(), told


def test_no_library_is_a_clear_error_and_auto_goes_on(tmp_path: Path) -> None:
    code = """
import json
import lite
from lite.kernel import describe_backend
from lite.status import NotSupportedError
session = lite.LiteSession.CreateSession(lite.Context(kernels="aot"))
buf = open({path!r}, "rb").read()
try:
    session.CompileGraph(lite.Model.Import(buf))
    error = ""
except NotSupportedError as e:
    error = str(e)
print(json.dumps({{"error": error, "auto": describe_backend("auto")}}))
"""
    path = tmp_path / "cnn.ms"
    path.write_bytes(convert(cnn()))
    result = python(code.format(path=str(path)), MSLITE_AOT_DIR=str(tmp_path), XDG_CACHE_HOME=str(tmp_path),
                    HOME=str(tmp_path))
    assert "python -m lite.kernels.compiled.aot.build" in result["error"], result
    assert "ahead of time" not in result["auto"], result


def test_a_library_of_other_kernel_sources_is_refused_for_the_next(built: Path, tmp_path: Path) -> None:
    """A stale library first in line (other kernel sources) is refused, and the user's cache is looked in next."""
    lib = tmp_path / "lib"
    shutil.copytree(built / "lib", lib)
    info_path = next(lib.glob("*.json"))
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "sources": "0" * 16}))
    describe = "import json; from lite.kernel import describe_backend; print(json.dumps(describe_backend('aot')))"
    alone = python(describe, MSLITE_AOT_DIR=str(lib), XDG_CACHE_HOME=str(tmp_path / "empty"))
    assert "other kernel sources" in alone and "ahead of time" not in alone, alone
    shutil.copytree(built / "lib", tmp_path / "cache" / "mslite" / "kernels" / info["sources"])
    after = python(describe, MSLITE_AOT_DIR=str(lib), XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert "compiled kernels (ahead of time" in after, after


ALL = slice(None)
RESHAPES = [((4, 6), ..., (2, 3, 4)), ((4, 6), (ALL, slice(None, None, 2)), (12,)), ((5, 8), "T", (4, 10)),
            ((5, 8), "T", (8, 5, 1)), ((3, 1, 4), ..., (12,)), ((2, 3, 4), (slice(None, None, -1),), (6, 4)),
            ((2, 3, 4), (slice(None, None, -1),), (2, 12)), ((6, 4), (ALL, slice(None, 2)), (3, 2, 2)),
            ((1, 8, 1), ..., (2, 1, 4))]


@pytest.mark.parametrize("shape, view, new", RESHAPES)
def test_the_runtimes_reshape_without_copy_is_numpys(built: Path, shape, view, new) -> None:
    """runtime.c's `numba_attempt_nocopy_reshape` (numba's reshape of a strided array) against numpy's: it
    succeeds where numpy can make a view, with strides that read the same elements."""
    lib = ctypes.CDLL(str(next((built / "lib").glob("*.so"))))
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = base.T if view == "T" else base[view]
    try:
        a.view().shape = new
        possible = True
    except AttributeError:
        possible = False
    strides = (ctypes.c_ssize_t * len(new))()
    sizes = lambda values: (ctypes.c_ssize_t * len(values))(*values)      # noqa: E731
    ok = lib.numba_attempt_nocopy_reshape(ctypes.c_ssize_t(a.ndim), sizes(a.shape), sizes(a.strides),
                                          ctypes.c_ssize_t(len(new)), sizes(new), strides,
                                          ctypes.c_ssize_t(a.itemsize), 0)
    assert bool(ok) == possible
    if possible:
        np.testing.assert_array_equal(np.lib.stride_tricks.as_strided(a, new, tuple(strides)), a.reshape(new))
