"""The converter writes the format `--saveType` names (`converter.export.SAVE_TYPES`): ours (MSPY) by default, byte
for byte as before; an unknown save type is refused naming the known ones, before any work."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import lite
import models
from converter import convert_file, to_graph
from converter.cli import main as converter_lite
from converter.export import SAVE_TYPES, SaveType, to_bytes
from converter.ir import Graph
from lite.format import FORMATS, Known
from tests.lite.format import toy_format

KNOWN = ("known: MSPY (our .ms format, the default), MINDIR_LITE (MindSpore Lite's own .ms, for its "
         "runtime)")
# sha256 of lenet5 (10 classes, 32x32) in format 1.3: our bytes change only on purpose, with FORMAT_VERSION
LENET_SHA256 = "f4d90f55e4378b8efcee26a91c024e4501fa6b6655e1f66e2ecdbf234f029365"


def lenet() -> Graph:
    return to_graph(models.build("lenet5", num_classes=10, input_size=32))


@pytest.fixture(scope="module")
def lenet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "lenet.onnx"
    models.save(models.build("lenet5", num_classes=10, input_size=32), path)
    return path


def test_ours_is_the_default_and_writes_the_same_bytes_as_before() -> None:
    data = to_bytes(lenet())
    assert data == to_bytes(lenet(), save_type="MSPY")
    assert data[4:8] == b"MSPY"
    assert hashlib.sha256(data).hexdigest() == LENET_SHA256


def test_an_unknown_save_type_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(lite.NotSupportedError) as e:
        to_bytes(lenet(), save_type="MINDIR")
    assert e.value.args[0] == f"--saveType=MINDIR is not supported; {KNOWN}"


def test_convert_file_refuses_an_unknown_save_type_before_writing(lenet_file: Path, tmp_path: Path) -> None:
    with pytest.raises(lite.NotSupportedError, match="--saveType=MINDIR is not supported"):
        convert_file(lenet_file, tmp_path / "lenet", save_type="MINDIR")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_an_unknown_save_type(lenet_file: Path, tmp_path: Path, capsys) -> None:
    status = converter_lite(["--fmk=ONNX", f"--modelFile={lenet_file}", f"--outputFile={tmp_path / 'lenet'}",
                             "--saveType=MINDIR"])
    assert status == lite.RET_NOT_SUPPORT
    assert KNOWN in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_cli_writes_ours_for_save_type_mspy(lenet_file: Path, tmp_path: Path) -> None:
    assert converter_lite(["--fmk=ONNX", f"--modelFile={lenet_file}", f"--outputFile={tmp_path / 'lenet'}",
                           "--saveType=MSPY"]) == lite.RET_OK
    assert hashlib.sha256((tmp_path / "lenet.ms").read_bytes()).hexdigest() == LENET_SHA256


def test_a_new_save_type_is_one_writer_module_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    module = "tests.lite.format.toy_format"
    monkeypatch.setitem(SAVE_TYPES, "TOY", SaveType(module, "a toy"))
    data = to_bytes(lenet(), save_type="TOY")
    assert data == toy_format.HEADER + to_bytes(lenet())
    monkeypatch.setitem(FORMATS, b"TOY1", Known(module, "a toy"))
    assert [n.op for n in lite.Model.Import(data).nodes] == [n.op for n in lite.Model.Import(data[8:]).nodes]
