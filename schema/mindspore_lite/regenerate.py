"""Regenerate `mindspore_lite_generated.py` from `mindspore_lite.fbs` with flatc
(``python -m schema.mindspore_lite.regenerate``).

Only readers are generated (no object API): the runtime reads these files, and a 221-member union's object API
would double the module for nothing. The module is committed so the runtime needs no compiler; a test checks that
it is exactly what this script produces.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FBS = HERE / "mindspore_lite.fbs"
GENERATED = HERE / "mindspore_lite_generated.py"


def generate(out_dir: Path) -> Path:
    """Run flatc on the schema into `out_dir` and return the generated module's path."""
    flatc = shutil.which("flatc")
    if flatc is None:
        raise RuntimeError("flatc not found: install the dev extra (pip install -e .[dev])")
    subprocess.run([flatc, "--python", "--gen-onefile", "--no-warnings", "-o", str(out_dir), str(FBS)], check=True)
    return out_dir / GENERATED.name


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        staged = GENERATED.with_suffix(".py.tmp")
        shutil.copyfile(generate(Path(tmp)), staged)
        os.replace(staged, GENERATED)
    print(f"wrote {GENERATED.relative_to(HERE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
