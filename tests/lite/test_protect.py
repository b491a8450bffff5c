"""Encrypted models and the integrity footer: round trips, and every wrong key, altered byte or truncation refused
with RET_GRAPH_FILE_ERR before anything runs; the key appears nowhere."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import lite
import models
from converter import convert
from converter.cli import main as converter_lite
from lite import protect
from lite.tools.benchmark import main as benchmark_lite

pytest.importorskip("cryptography", reason="encryption needs the cryptography package (the crypto and dev extras)")

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
REFUSED = "wrong key or tampered file"


@pytest.fixture(scope="module")
def lenet(tmp_path_factory) -> tuple[Path, bytes]:
    folder = tmp_path_factory.mktemp("protect")
    onnx_path = folder / "lenet.onnx"
    models.save(models.build("lenet5"), onnx_path)
    return onnx_path, convert(models.build("lenet5"))


def logits(model: lite.Model) -> np.ndarray:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    session.CompileGraph(model)
    session.GetInputs()[0].set_data(np.linspace(-1, 1, 1024, dtype=np.float32).reshape(1, 1, 32, 32))
    session.RunGraph()
    return session.GetOutputs()["logits"].numpy().copy()


def refused(data: bytes, key: str | bytes | None = KEY) -> str:
    with pytest.raises(lite.GraphFileError) as e:
        lite.Model.Import(data, dec_key=key)
    assert e.value.status == lite.RET_GRAPH_FILE_ERR
    return str(e.value)


def test_converter_writes_an_encrypted_model_that_loads_with_its_key(lenet, tmp_path: Path, capsys) -> None:
    onnx_path, plain = lenet
    assert converter_lite(["--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={tmp_path / 'm'}",
                           f"--encryptKey={KEY}", "--encryption=true"]) == 0
    data = (tmp_path / "m.ms").read_bytes()
    assert data.startswith(protect.MAGIC_ENCRYPTED) and len(data) == len(plain) + 22 + 16
    assert b"lenet5" not in data and plain[4096:4160] not in data          # names and weights are hidden
    assert bytes.fromhex(KEY) not in data and KEY.encode() not in data
    assert np.array_equal(logits(lite.Model.Load(tmp_path / "m.ms", dec_key=KEY)), logits(lite.Model.Import(plain)))
    assert KEY not in capsys.readouterr().out


@pytest.mark.parametrize("key_bytes", [16, 24, 32])
def test_each_aes_key_length_round_trips_with_a_fresh_nonce(lenet, key_bytes: int) -> None:
    _, plain = lenet
    key = os.urandom(key_bytes)
    first, second = protect.encrypt(plain, key), protect.encrypt(plain, key)
    assert first != second                                                 # a fresh nonce per file
    assert first[9] == {16: 1, 24: 2, 32: 3}[key_bytes]                     # the header names the scheme
    assert np.array_equal(logits(lite.Model.Import(first, dec_key=key)), logits(lite.Model.Import(plain)))


def test_missing_and_wrong_keys_are_refused(lenet) -> None:
    _, plain = lenet
    data = protect.encrypt(plain, KEY)
    assert "encrypted" in refused(data, None)
    wrong = KEY[:-1] + "0"
    message = refused(data, wrong)
    assert REFUSED in message and KEY not in message and wrong not in message
    assert REFUSED in refused(data, KEY[:32])                               # a 16-byte key for a 32-byte file


@pytest.mark.parametrize("where", ["magic", "version", "scheme", "nonce", "payload", "last payload byte", "tag"])
def test_any_altered_byte_is_refused(lenet, where: str) -> None:
    _, plain = lenet
    data = bytearray(protect.encrypt(plain, KEY))
    position = {"magic": 3, "version": 8, "scheme": 9, "nonce": 15, "payload": 5000,
                "last payload byte": len(data) - 17, "tag": len(data) - 1}[where]
    data[position] ^= 0x01
    expected = {"magic": "not encrypted", "version": "version 0 is not supported"}.get(where, REFUSED)
    assert expected in refused(bytes(data))


def test_truncated_encrypted_models_are_refused(lenet) -> None:
    _, plain = lenet
    data = protect.encrypt(plain, KEY)
    for size in (0, 10, 30, 38, len(data) // 2, len(data) - 1):
        with pytest.raises(lite.GraphFileError):
            lite.Model.Import(data[:size], dec_key=KEY)


def test_bad_keys_are_parameter_errors(lenet) -> None:
    _, plain = lenet
    for key in ("00ff", "zz" * 16, b"short"):
        with pytest.raises(lite.ParamInvalidError) as e:
            protect.encrypt(plain, key)
        assert e.value.status == lite.RET_PARAM_INVALID
    assert "not encrypted" in refused(plain)                                 # a key for a plain model


def test_create_session_and_benchmark_take_the_key(lenet, tmp_path: Path) -> None:
    _, plain = lenet
    data = protect.encrypt(plain, KEY)
    session = lite.LiteSession.CreateSession(data, len(data), lite.Context(thread_num=1), dec_key=KEY)
    assert session.GetInputs()[0].shape() == [1, 1, 32, 32]
    with pytest.raises(lite.ParamInvalidError):
        lite.LiteSession.CreateSession(lite.Context(), dec_key=KEY)
    (tmp_path / "enc.ms").write_bytes(data)
    assert benchmark_lite([f"--modelFile={tmp_path / 'enc.ms'}", f"--decryptKey={KEY}", "--loopCount=1"]) == 0
    assert benchmark_lite([f"--modelFile={tmp_path / 'enc.ms'}", "--loopCount=1"]) == lite.RET_GRAPH_FILE_ERR


def test_converter_refuses_bad_key_flags(lenet, tmp_path: Path, capsys) -> None:
    onnx_path, _ = lenet
    base = ["--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={tmp_path / 'm'}"]
    assert converter_lite(base + ["--encryptKey=abc"]) != 0
    assert converter_lite(base + [f"--encryptKey={KEY}", "--integrity=true"]) != 0
    err = capsys.readouterr().err
    assert "--encryptKey" in err and "--integrity" in err and KEY not in err
    assert not (tmp_path / "m.ms").exists()
    assert converter_lite(base + [f"--encryptKey={KEY}", "--encryption=false"]) == 0   # the key is set aside
    assert not protect.is_encrypted((tmp_path / "m.ms").read_bytes())


def test_integrity_footer_is_checked_and_keeps_weights_zero_copy(lenet, tmp_path: Path) -> None:
    onnx_path, plain = lenet
    assert converter_lite(["--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={tmp_path / 'm'}",
                           "--integrity=true"]) == 0
    path = tmp_path / "m.ms"
    data = path.read_bytes()
    assert data[:len(plain)] == plain and len(data) == len(plain) + 40
    model = lite.Model.Load(path)
    weight = next(t.data for t in model.tensors if t.is_const and t.data.size > 100)
    assert not weight.flags.owndata and not weight.flags.writeable             # a view into the mapped file
    assert np.array_equal(logits(model), logits(lite.Model.Import(plain)))
    for position in (100, len(plain) // 2, len(data) - 1):
        altered = bytearray(data)
        altered[position] ^= 0x80
        assert "integrity check failed" in refused(bytes(altered), None)


def test_inspect_reads_an_encrypted_model_with_its_key(lenet, tmp_path: Path, capsys) -> None:
    from lite.inspect import main as inspect
    _, plain = lenet
    (tmp_path / "enc.ms").write_bytes(protect.encrypt(plain, KEY))
    assert inspect([str(tmp_path / "enc.ms"), f"--decryptKey={KEY}"]) == 0
    assert "AES-GCM encrypted" in capsys.readouterr().out
    assert inspect([str(tmp_path / "enc.ms")]) == 1
    err = capsys.readouterr().err
    assert "encrypted" in err and "-200" in err
