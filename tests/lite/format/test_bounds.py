"""A damaged per-channel quantization vector is a GraphFileError that names it, never a crash or a wrong model."""
from __future__ import annotations

import struct

import pytest

from lite.model import Model
from lite.status import GraphFileError
from schema import fb
from schema.fbs_layout import load
from tests.lite.format.mspy.test_writer import CHANNELS, W, int8_conv, weight_params, write


def vector_length_at(buf: bytes, field: str) -> int:
    """The byte position of the length of the weight's `ChannelQuant.<field>` vector."""
    table = fb.MetaGraph.GetRootAs(buf, 0).AllTensors(W).ChannelQuant()._tab
    slot = next(f.slot for f in load().tables["ChannelQuant"] if f.name == field)
    return table.Vector(table.Offset(4 + 2 * slot)) - 4


def with_length(buf: bytes, field: str, count: int) -> bytes:
    damaged = bytearray(buf)
    struct.pack_into("<I", damaged, vector_length_at(buf, field), count)
    return bytes(damaged)


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    return write(*int8_conv(weight_params([0, 1, 2, 3])))


def test_the_undamaged_buffer_imports(model_bytes: bytes) -> None:
    assert len(Model.Import(model_bytes).tensors[W].quant_params) == CHANNELS


@pytest.mark.parametrize("field", ["scales", "zero_points"])
def test_a_vector_running_past_the_end_is_named(model_bytes: bytes, field: str) -> None:
    too_many = (len(model_bytes) - vector_length_at(model_bytes, field)) // 4
    with pytest.raises(GraphFileError, match=f"ChannelQuant.{field} runs past the end"):
        Model.Import(with_length(model_bytes, field, too_many))


@pytest.mark.parametrize("field", ["scales", "zero_points"])
def test_a_huge_vector_length_is_named(model_bytes: bytes, field: str) -> None:
    with pytest.raises(GraphFileError, match=f"ChannelQuant.{field} claims 4294967295 elements"):
        Model.Import(with_length(model_bytes, field, 0xFFFFFFFF))


def test_a_buffer_cut_inside_the_scales_is_rejected(model_bytes: bytes) -> None:
    cut = vector_length_at(model_bytes, "scales") + 4 + 8 * CHANNELS // 2
    with pytest.raises(GraphFileError, match="runs past the end"):
        Model.Import(model_bytes[:cut])


def test_zero_points_that_do_not_match_the_scales_name_the_tensor(model_bytes: bytes) -> None:
    with pytest.raises(GraphFileError, match=f"tensor 'w': .* {CHANNELS} scales but {CHANNELS - 1} zero points"):
        Model.Import(with_length(model_bytes, "zero_points", CHANNELS - 1))


def test_scales_that_do_not_match_the_channel_axis_name_the_tensor() -> None:
    symmetric = write(*int8_conv(weight_params()))     # no zero points to disagree with
    with pytest.raises(GraphFileError, match=f"tensor 'w' has {CHANNELS - 1} channel quant params, but its dims"):
        Model.Import(with_length(symmetric, "scales", CHANNELS - 1))


def test_empty_scales_name_the_tensor(model_bytes: bytes) -> None:
    with pytest.raises(GraphFileError, match="tensor 'w': per-channel quantization has no scales"):
        Model.Import(with_length(model_bytes, "scales", 0))
