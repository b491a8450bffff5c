"""The real MindSpore Lite 2.0 C++ runtime as a benchmark peer: wheel fetched, `peer.cc` built, on first use.

PyPI's `mindspore-lite` 2.0.0 wheel is built for CPython 3.7 only, but its x86-64 libraries load without it: `pip
download` fetches the wheel for 3.7 (whatever Python runs this), its `lib/` and `include/` are unpacked into the
cache and `peer.cc` is compiled against them with g++ (the wheel's old C++ ABI, an RPATH to its `lib/`). Nothing
lands in the repository: the cache is `$MSLITE_PEER_CACHE`, else `~/.cache/mslite-peer`. Every step that cannot
be done raises `Unavailable` with the reason, so the benchmark can leave the peer out with one line.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "2.0.0"
SOURCE = Path(__file__).resolve().with_name("peer.cc")
LIBRARIES = ("mindspore-extendrt_python", "mindspore_converter", "mindspore_core")
# The wheel's libraries are built with the pre-C++11 std::string; its RPATH-less libraries find each other
# through the program's RPATH, which only the old DT_RPATH (not RUNPATH) passes on to dependencies. The program
# exports its symbols (-rdynamic) so that its Model::Build stands in for the library's (see peer.cc).
FLAGS = ("-std=c++17", "-O2", "-D_GLIBCXX_USE_CXX11_ABI=0", "-rdynamic")


class Unavailable(RuntimeError):
    """The peer cannot be had here; the message says why."""


def cache() -> Path:
    return Path(os.environ.get("MSLITE_PEER_CACHE", "~/.cache/mslite-peer")).expanduser()


def wheel() -> Path:
    """The wheel in the cache, downloaded with pip first if absent (tags of CPython 3.7, manylinux x86-64)."""
    found = sorted(cache().glob(f"mindspore_lite-{VERSION}-*.whl"))
    if found:
        return found[0]
    if sys.platform != "linux" or platform.machine() != "x86_64":
        raise Unavailable(f"its wheel is for Linux x86-64, this is {sys.platform} {platform.machine()}")
    cache().mkdir(parents=True, exist_ok=True)
    result = subprocess.run([sys.executable, "-m", "pip", "download", f"mindspore-lite=={VERSION}", "--no-deps",
                             "--only-binary=:all:", "--python-version", "3.7", "--implementation", "cp",
                             "--abi", "cp37m", "--platform", "manylinux1_x86_64", "-d", str(cache())],
                            capture_output=True, text=True, timeout=900)
    found = sorted(cache().glob(f"mindspore_lite-{VERSION}-*.whl"))
    if result.returncode != 0 or not found:
        raise Unavailable(f"pip cannot download mindspore-lite=={VERSION}: {last_line(result.stderr)}")
    return found[0]


def unpacked() -> Path:
    """The wheel's `mindspore_lite/` folder (only `lib/` and `include/`), unpacked once; renamed into place
    whole, so an interrupted unpack is never taken for a complete one."""
    root = cache() / VERSION / "mindspore_lite"
    if (root / "lib").is_dir():
        return root
    with zipfile.ZipFile(wheel()) as archive, tempfile.TemporaryDirectory(dir=cache()) as tmp:
        names = [n for n in archive.namelist() if n.startswith(("mindspore_lite/lib/", "mindspore_lite/include/"))]
        archive.extractall(tmp, names)
        root.parent.mkdir(parents=True, exist_ok=True)
        if not root.exists():     # else another process unpacked it meanwhile
            os.replace(Path(tmp) / "mindspore_lite", root)
    return root


def binary() -> Path:
    """The compiled `peer.cc`, built on first use; its name carries a hash of the source and flags, so an edit
    of either rebuilds it."""
    root = unpacked()
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:12]
    path = root.parent / f"peer-{digest}"
    if path.exists():
        return path
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        raise Unavailable("no C++ compiler (g++, or $CXX) to build bench/mindspore_lite_peer/peer.cc")
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    result = subprocess.run([compiler, *FLAGS, f"-I{root}", str(SOURCE), "-o", str(tmp), f"-L{root / 'lib'}",
                             *(f"-l{lib}" for lib in LIBRARIES), "-ldl",
                             f"-Wl,--disable-new-dtags,-rpath,{root / 'lib'}"],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise Unavailable(f"peer.cc does not build: {last_line(result.stderr)}")
    os.replace(tmp, path)
    return path


def convert(program: Path, onnx_path: Path, input_name: str, shape: tuple[int, ...], save_type: str = "MINDIR",
            input_format: str = "NCHW", prefix: Path | None = None, config: Path | None = None) -> Path:
    """MindSpore Lite's own converter: ONNX -> `prefix` (default: next to the ONNX file) + `.mindir` (save type
    MINDIR) or `.ms` (MINDIR_LITE, the device format), input fixed to `shape` (the ONNX model's layout) and given
    to the model in `input_format`; `config` is converter_lite's --configFile (quantization). Raises RuntimeError
    with the converter's last message when it fails."""
    prefix = prefix or onnx_path.with_suffix("")
    result = subprocess.run([str(program), "convert", str(onnx_path), str(prefix), input_name,
                             ",".join(map(str, shape)), save_type, input_format, str(config or "")],
                            capture_output=True, text=True, timeout=900)
    out = prefix.with_name(prefix.name + (".ms" if save_type == "MINDIR_LITE" else ".mindir"))
    if result.returncode != 0 or not out.exists():
        raise RuntimeError(last_line(result.stderr))
    return out


def run_argv(program: Path, mindir: str, x_path: Path, shape: tuple[int, ...], warmup: int, runs: int,
             y_path: Path) -> list[str]:
    """The command of one run (see `peer.cc`): it prints bench/harness.py's worker JSON line, writes the output."""
    return [str(program), "run", mindir, str(x_path), ",".join(map(str, shape)), str(warmup), str(runs),
            str(y_path)]


def last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no message"])[-1]
