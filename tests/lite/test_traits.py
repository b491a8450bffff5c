"""Op traits: every declaration belongs to an op with a kernel, and refers to inputs the op has."""
import pytest

from lite.kernel import registered
from lite.traits import DEFAULT, Layout, OpTraits, TrainMode, declared, traits


def _registered_ops() -> set[str]:
    return {op for op, *_ in registered()}


def test_every_declared_op_has_a_kernel():
    assert set(declared()) <= _registered_ops()


def test_an_op_without_a_declaration_gets_the_defaults():
    assert "Shape" in _registered_ops() and "Shape" not in declared()
    assert traits("Shape") is DEFAULT
    assert traits("NoSuchOp") == OpTraits()


def test_conv_declares_its_weight_bias_and_rewrites():
    conv = traits("Conv2D")
    assert (conv.weight_input, conv.weight_axis, conv.bias_input) == (1, 0, 2)
    assert conv.bias_correction and conv.fused_activation and conv.batchnorm_folds and conv.absorbs_pad


def test_an_unknown_layout_kind_is_refused():
    with pytest.raises(ValueError, match="sideways"):
        Layout("sideways")


@pytest.mark.parametrize("bad", [dict(noop="sometimes"), dict(bias_correction=True)])
def test_inconsistent_records_are_refused(bad):
    with pytest.raises(ValueError):
        OpTraits(**bad)


def test_train_mode_is_declared_by_batchnorm_dropout_the_norms_the_recurrent_ops_and_attention():
    assert {op for op, t in declared().items() if isinstance(t.train, TrainMode)} == {
        "BatchNorm", "Dropout", "LayerNorm", "GroupNorm", "LSTM", "GRU", "RNN", "RMSNorm", "Attention"}
