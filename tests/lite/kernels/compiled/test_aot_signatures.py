"""`signatures.txt` keeps up with the compiled kernels: every call that zoo models bind with numba's JIT — float,
static int8 and DYNAMIC_QUANT — has its entry, so the ahead-of-time library runs them (a kernel added or given
other arguments without its line fails here; `python bench/aot_signatures.py --write` adds the lines, and checks
the whole zoo and the wild bench)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.util import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="recording needs numba's JIT")

sys.path.insert(0, str(REPO / "bench"))
import aot_signatures  # noqa: E402

# One model per compiled-kernel family: CNN (conv tiles, Winograd, depthwise, GEMM, pooling), int8 CNN (conv, FC,
# requantize, pooling, quant cast, arithmetic; onnxruntime's QDQ form and its rounding), transformer (LayerNorm, GELU, softmax, attention GEMMs) and its
# dynamic int8 GEMM, recurrent float and dynamic int8.
MODELS = ["mobilenet_v2", "lenet5", "tiny_yolo", "text_encoder", "kws_gru"]
INPUT_SIZE = 96        # of the classifiers, for speed (`bench/aot_signatures.py` checks the zoo at full size)


def test_every_call_of_the_zoo_models_has_its_signature(tmp_path: Path) -> None:
    from lite.kernels.compiled.aot import build
    paths, feeds, _ = aot_signatures.files(MODELS, tmp_path, INPUT_SIZE)
    assert len(paths) == 11, paths                 # each float, and each int8 form the bench makes of it
    lacking = build.missing(build.recorded(paths, feeds))
    assert not lacking, ("entries missing from signatures.txt (add them with `python bench/aot_signatures.py "
                         "--write`):\n" + "\n".join(lacking))


def test_the_check_finds_an_entry_the_file_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lite.kernels.compiled.aot import build
    paths, feeds, _ = aot_signatures.files(["lenet5"], tmp_path)
    keys = build.recorded(paths, feeds)
    file = tmp_path / "signatures.txt"
    file.write_text("\n".join(k for k in keys if ".gemm_requantize:" not in k) + "\n")
    monkeypatch.setattr(build, "SIGNATURES", file)
    assert build.missing(keys) == [k for k in keys if ".gemm_requantize:" in k] != []
