"""`Model.Import` reads a buffer by the format its file identifier names (`lite.format.FORMATS`); an unknown
identifier is refused naming the known ones; a new format is one module plus one registry line."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import lite
import models
from converter import convert
from lite import format as formats
from lite import protect
from lite.format import FORMATS, Known, mspy
from tests.lite.format import toy_format
from tests.util import run_lite

TOY = "tests.lite.format.toy_format"


@pytest.fixture(scope="module")
def lenet() -> bytes:
    return convert(models.build("lenet5", num_classes=10, input_size=32))


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one registry line of the toy format, its module not yet imported."""
    monkeypatch.setitem(FORMATS, b"TOY1", Known(TOY, "a toy"))
    monkeypatch.delitem(sys.modules, TOY, raising=False)


def outputs(model: lite.Model) -> np.ndarray:
    session = lite.LiteSession.CreateSession(lite.Context())
    session.CompileGraph(model)
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 32)).astype(np.float32)
    return run_lite(session, {"input": x})["logits"]


def test_our_files_are_read_by_our_format(lenet: bytes) -> None:
    assert lenet[4:8] == b"MSPY"
    assert formats.find(memoryview(lenet)) is mspy


def test_an_unknown_identifier_is_refused_naming_the_known_ones(lenet: bytes) -> None:
    other = lenet[:4] + b"XXXX" + lenet[8:]
    with pytest.raises(lite.GraphFileError) as e:
        lite.Model.Import(other)
    message = e.value.args[0]
    assert message.startswith("unknown .ms format: file identifier b'XXXX'; known: b'MSPY' (ours)")
    assert all(repr(ident) in message for ident in FORMATS)
    assert e.value.status == lite.RET_GRAPH_FILE_ERR


def test_a_buffer_too_small_for_an_identifier_is_refused() -> None:
    with pytest.raises(lite.GraphFileError, match="7 bytes: too small"):
        lite.Model.Import(b"\x00" * 7)


def test_a_new_format_is_one_module_and_one_registry_line(lenet: bytes, toy_registered: None) -> None:
    toy = toy_format.HEADER + lenet
    assert TOY not in sys.modules              # imported when a buffer of its format is first read
    got = outputs(lite.Model.Import(toy))
    assert TOY in sys.modules
    np.testing.assert_array_equal(got, outputs(lite.Model.Import(lenet)))


def test_the_new_format_is_named_among_the_known_ones(toy_registered: None) -> None:
    with pytest.raises(lite.GraphFileError, match=r"known: b'MSPY' \(ours\), .*b'TOY1' \(a toy\)"):
        lite.Model.Import(b"\x00" * 4 + b"XXXX" + b"\x00" * 8)


def test_the_new_format_verifies_its_buffers(lenet: bytes, toy_registered: None) -> None:
    cut = toy_format.HEADER + lenet[:len(lenet) // 2]
    with pytest.raises(lite.GraphFileError, match="malformed"):
        lite.Model.Import(cut)


def test_without_its_registry_line_the_new_format_is_unknown(lenet: bytes) -> None:
    with pytest.raises(lite.GraphFileError, match="file identifier b'TOY1'"):
        lite.Model.Import(toy_format.HEADER + lenet)


def test_an_encrypted_file_is_decrypted_before_its_format_is_found(lenet: bytes, toy_registered: None) -> None:
    pytest.importorskip("cryptography", reason="encryption needs the cryptography package")
    key = bytes(range(16))
    model = lite.Model.Import(protect.encrypt(toy_format.HEADER + lenet, key), dec_key=key)
    np.testing.assert_array_equal(outputs(model), outputs(lite.Model.Import(lenet)))
