"""The official ONNX backend node tests, for every test whose ops all have an importer rule.

Exclusions live in `tests/conformance/*.txt`, one `regex  # reason` per line.
"""
from __future__ import annotations

import re
from pathlib import Path

import onnx
import onnx.backend.test
from onnx.backend.test.loader import load_model_tests

from converter.frontends.onnx import supported_ops
from converter.onnx_backend import LiteBackend

EXCLUSIONS = Path(__file__).parent / "conformance"


def _exclusions() -> list[str]:
    patterns = []
    for f in sorted(EXCLUSIONS.glob("*.txt")):
        for line in f.read_text().splitlines():
            pattern = line.split("#", 1)[0].strip()
            if pattern:
                patterns.append(pattern)
    return patterns


def claimed_tests() -> list[str]:
    """Names of the node tests whose every op the converter claims to import."""
    ops = set(supported_ops())
    names = []
    for case in load_model_tests(kind="node"):
        model = case.model
        if {n.op_type for n in model.graph.node} <= ops and all(n.domain in ("", "ai.onnx")
                                                                 for n in model.graph.node):
            names.append(case.name)
    return names


_backend_test = onnx.backend.test.BackendTest(LiteBackend, __name__)
_names = claimed_tests()
_backend_test.include("^(" + "|".join(re.escape(n) for n in _names) + ")_cpu$" if _names else "^$")
for _pattern in _exclusions():
    _backend_test.exclude(_pattern)
_cases = _backend_test.test_cases     # a property that builds new classes on every access: read it once
for _case in _cases.values():          # keep only the claimed, not excluded tests (no wall of skips)
    for _name in [n for n, f in vars(_case).items() if getattr(f, "__unittest_skip__", False)]:
        delattr(_case, _name)
globals().update(_cases)
