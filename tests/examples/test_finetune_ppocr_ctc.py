"""A short run of examples/finetune_ppocr_ctc.py on the real PP-OCRv4 recognizer of rapidocr-onnxruntime: only
its classifier trains (3 steps), so the run takes seconds; the CTC loss falls and the exported inference model
gives the session's logits within 1e-5 of their range."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from finetune_ppocr_ctc import LINES, characters, decode, encode, main, recognizer_path  # noqa: E402

pytest.importorskip("PIL", reason="the example renders its text lines with Pillow")
if recognizer_path() is None:
    pytest.skip("rapidocr-onnxruntime (its PP-OCRv4 recognizer) is not installed: "
                "pip install --no-deps rapidocr-onnxruntime==1.4.4", allow_module_level=True)


def test_labels_and_greedy_decoding_use_pp_ocr_classes():
    chars = characters(onnx.load(recognizer_path()))
    assert len(chars) == 6625 and chars[0] == "<blank>" and chars[-1] == " "
    labels = encode(LINES[:1], chars)[0]                            # "HELLO 42": its LL needs a blank between
    frames = [k for k in labels[:len(LINES[0])] for k in (k, k, 0)]     # each class twice, then a blank
    logits = np.full((len(frames), 1, len(chars)), -5.0, np.float32)
    logits[np.arange(len(frames)), 0, frames] = 5.0
    assert decode(logits, chars) == [LINES[0]]


def test_head_fine_tune_lowers_the_ctc_loss_and_exports_the_session(tmp_path, capsys):
    assert main(["--steps", "3", "--trainable", r"linear_85\..*", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    losses = [float(line.rsplit(" ", 1)[1]) for line in printed.splitlines() if line.startswith("step ")]
    assert len(losses) == 3 and losses[2] < losses[0]
    assert (tmp_path / "ppocr_rec_finetuned.ms").exists()
    exported = next(line for line in printed.splitlines() if line.startswith("exported "))
    assert float(exported.split(" within ")[1].split()[0]) <= 1e-5, exported
