"""Regenerate `schema/model_generated.py` from `schema/model.fbs` with flatc (``python -m schema.regenerate``).

The generated module is committed so that the runtime needs no compiler; `tests/schema/test_schema.py` checks that it is
exactly what this script produces.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent
FBS = SCHEMA_DIR / "model.fbs"
GENERATED = SCHEMA_DIR / "model_generated.py"
FLATC_ARGS = ("--python", "--gen-object-api", "--gen-onefile")


def generate(out_dir: Path) -> Path:
    """Run flatc on model.fbs into `out_dir` and return the generated module's path."""
    flatc = shutil.which("flatc")
    if flatc is None:
        raise RuntimeError("flatc not found: install the dev extra (pip install -e .[dev])")
    subprocess.run([flatc, *FLATC_ARGS, "-o", str(out_dir), str(FBS)], check=True)
    return out_dir / "model_generated.py"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        produced = generate(Path(tmp))
        staged = GENERATED.with_suffix(".py.tmp")
        shutil.copyfile(produced, staged)
        os.replace(staged, GENERATED)
    print(f"wrote {GENERATED.relative_to(SCHEMA_DIR.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
