"""aarch64 as a checked target of the compiled kernels: `bench/aarch64_check.py` builds the ahead-of-time library
for aarch64 under user-mode emulation and runs MobileNetV2 and the text encoder from it, float and int8, in a process
that must not import numba, within 1e-5 of the numpy kernels. Minutes under emulation, so opt-in: set MSLITE_AARCH64_DIR to a
folder prepared by `../shared/tools/aarch64-python setup DIR`."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.util import REPO

TOOL = REPO.parent / "shared" / "tools" / "aarch64-python"
FOLDER = os.environ.get("MSLITE_AARCH64_DIR", "")


@pytest.mark.skipif(not TOOL.exists(), reason="the aarch64 emulation tool lives in ../shared, absent here")
@pytest.mark.skipif(not FOLDER or not (Path(FOLDER) / "root").is_dir(),
                    reason="set MSLITE_AARCH64_DIR to a folder prepared by `aarch64-python setup` (minutes)")
@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="no aarch64 cross compiler to link with")
def test_mobilenet_v2_and_the_text_encoder_run_compiled_on_aarch64(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    import aarch64_check
    assert aarch64_check.main([FOLDER, "--tool", str(TOOL), "--report", str(tmp_path / "aarch64.md")]) == 0
