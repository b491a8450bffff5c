"""`MSLITE_CPU_TARGET` (a lower instruction-set level than the host's, to test its vector width) also sets numba's
CPU, which keys numba's on-disk cache: machine code compiled for the host's 16 lanes is never loaded for 8."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("numba", reason="numba not installed")
from lite.kernels.compiled import llvm  # noqa: E402

PROBE = ("import json, numba; from lite.kernels.compiled import llvm; "  # numba first: the harder order
         "print(json.dumps([llvm.TARGET, llvm.LANES, numba.config.CPU_NAME, numba.config.CPU_FEATURES]))")


def probe(env: dict[str, str]) -> list:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU") and k != llvm.CPU_ENV}
    result = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                            timeout=120, check=True)
    return json.loads(result.stdout)


@pytest.mark.skipif(not llvm.host_target().startswith("x86_64-v4"), reason="needs an AVX-512 host")
def test_a_lower_target_compiles_for_its_cpu() -> None:
    assert probe({llvm.CPU_ENV: "x86_64-v3"}) == ["x86_64-v3", 8, "x86-64-v3", "+avx2"]


def test_the_host_target_leaves_numba_on_the_host_cpu() -> None:
    target, lanes, cpu, features = probe({})
    assert target == llvm.host_target() and lanes == llvm.LANES and cpu is None and features is None
