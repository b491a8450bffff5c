"""Math ops (UnaryMath, the new activations, Mod, Cumulative, Einsum, Det, Hardmax): importer rules + kernels
against onnxruntime and onnx.reference over the dtypes the ONNX ops allow, and the bad-input contract."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from converter import convert
from lite.status import InvalidOpAttrError
from tests.node_cases import node_cases
from tests.lite.kernels.test_elementwise import one_node
from tests.util import assert_matches_oracles, run_lite, session_for

rng = np.random.default_rng(0)

# op -> the open interval its inputs are drawn from (inside the domain, away from the poles)
UNARY = {"Floor": (-4, 4), "Ceil": (-4, 4), "Round": (-4, 4), "Reciprocal": (0.2, 3), "Sign": (-3, 3),
         "Sin": (-4, 4), "Cos": (-4, 4), "Tan": (-1.4, 1.4), "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99),
         "Atan": (-4, 4), "Sinh": (-4, 4), "Cosh": (-4, 4), "Asinh": (-4, 4), "Acosh": (1.01, 5),
         "Atanh": (-0.99, 0.99)}


def floats(dtype: type, low: float, high: float, *shape: int) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("op", UNARY)
def test_unary_math(op: str, dtype: type) -> None:
    x = floats(dtype, *UNARY[op], 3, 5)
    if op in ("Round", "Floor", "Ceil", "Sign"):
        x.reshape(-1)[:6] = [0.5, 1.5, -0.5, -2.5, 0.0, 2.0]      # ties round to even
    tol = 2e-3 if dtype == np.float16 else 1e-6
    assert_matches_oracles(one_node(op, {"x": x}), {"x": x}, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_sign_of_integers(dtype: type) -> None:
    x = rng.integers(0 if dtype == np.uint8 else -5, 5, (3, 4)).astype(dtype)
    assert_matches_oracles(one_node("Sign", {"x": x}), {"x": x})


ACTIVATIONS = [("Softplus", {}), ("Softsign", {}), ("Mish", {}), ("Celu", {}), ("Celu", {"alpha": 0.5}),
               ("Selu", {}), ("Selu", {"alpha": 2.0, "gamma": 0.5}), ("ThresholdedRelu", {}),
               ("ThresholdedRelu", {"alpha": -0.5}), ("Shrink", {}), ("Shrink", {"lambd": 1.0, "bias": 0.3}),
               ("Swish", {}), ("Swish", {"alpha": 0.7})]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op, attrs", ACTIVATIONS, ids=lambda v: str(v))
def test_activation(op: str, attrs: dict, dtype: type) -> None:
    x = floats(dtype, -6, 6, 4, 5)
    x.reshape(-1)[:2] = [40.0, -40.0]                           # far tails: no overflow
    opset = 24 if op == "Swish" else 22
    # onnxruntime has no Swish and its Celu schema takes float32 only
    ort_lacks = op == "Swish" or (op == "Celu" and dtype == np.float64)
    oracles = ("reference",) if ort_lacks else ("onnxruntime", "reference")
    assert_matches_oracles(one_node(op, {"x": x}, opset=opset, **attrs), {"x": x}, rtol=2e-6, atol=1e-6,
                           oracles=oracles)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64])
def test_mod_broadcasts_with_the_sign_rule_of_fmod(fmod: int, dtype: type) -> None:
    if np.dtype(dtype).kind == "f":
        a, b = floats(dtype, -9, 9, 3, 4), (floats(dtype, 0.5, 4, 4) * rng.choice([-1, 1], 4)).astype(dtype)
    else:
        low = 0 if np.dtype(dtype).kind == "u" else -9
        a = rng.integers(low, 10, (3, 4)).astype(dtype)
        b = (rng.integers(1, 5, 4) * (1 if low == 0 else rng.choice([-1, 1], 4))).astype(dtype)
    opset = 28 if np.dtype(dtype).kind == "f" and not fmod else 13
    oracles = ("reference",) if opset == 28 else ("onnxruntime", "reference")
    assert_matches_oracles(one_node("Mod", {"a": a, "b": b}, opset=opset, fmod=fmod), {"a": a, "b": b},
                           oracles=oracles)


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum(axis: int, dtype: type, exclusive: int, reverse: int) -> None:
    x = rng.integers(-5, 6, (3, 4, 2)).astype(dtype)
    model = one_node("CumSum", {"x": x}, {"axis": np.array(axis, np.int64)}, exclusive=exclusive, reverse=reverse)
    assert_matches_oracles(model, {"x": x})


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_cumprod(dtype: type, exclusive: int, reverse: int) -> None:
    x = rng.integers(-3, 4, (3, 4)).astype(dtype)
    model = one_node("CumProd", {"x": x}, {"axis": np.array(1, np.int32)}, opset=26, exclusive=exclusive,
                     reverse=reverse)
    assert_matches_oracles(model, {"x": x}, oracles=("reference",))     # no CumProd in onnxruntime yet


def test_cumsum_axis_out_of_range_names_the_node() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(InvalidOpAttrError, match="running.*axis 2 is out of range"):
        convert(one_node("CumSum", {"x": x}, {"axis": np.array(2, np.int64)}, name="running"))


EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]),
           ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("i,i", [(5,), (5,)]), ("ij", [(3, 4)]), ("ba", [(3, 4)]),
           ("i,j->ij", [(3,), (4,)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]), ("...ii->...i", [(2, 3, 3)]),
           ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bij->", [(2, 3, 4)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4)] * 2)]


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("equation, shapes", EINSUMS, ids=lambda v: str(v))
def test_einsum(equation: str, shapes: list, dtype: type) -> None:
    feeds = {f"x{k}": rng.integers(-3, 4, s).astype(dtype) for k, s in enumerate(shapes)}
    model = one_node("Einsum", feeds, equation=equation)
    assert_matches_oracles(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation, b_shape, why", [("ij->ij", (4, 5), "1 input terms for 2 inputs"),
                                                    ("ij,jk->ik", (3, 5), "label 'j' has sizes 4 and 3"),
                                                    ("ijk,jk->ik", (4, 5), "does not fit"),
                                                    ("ij,jk->iz", (4, 5), "no input has")])
def test_einsum_bad_equation_names_the_node(equation: str, b_shape: tuple, why: str) -> None:
    feeds = {"a": np.zeros((3, 4), np.float32), "b": np.zeros(b_shape, np.float32)}
    with pytest.raises(InvalidOpAttrError, match=f"contract.*{why}"):
        convert(one_node("Einsum", feeds, equation=equation, name="contract"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 2, 2)])
def test_det(shape: tuple, dtype: type) -> None:
    x = rng.standard_normal(shape).astype(dtype)
    assert_matches_oracles(one_node("Det", {"x": x}), {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset, axis", [(13, -1), (13, 0), (13, 1), (11, 1), (11, 0), (11, 2)])
def test_hardmax_picks_the_first_maximum(opset: int, axis: int) -> None:
    x = rng.integers(0, 3, (2, 3, 4)).astype(np.float32)          # ties: the first one wins
    # onnx.reference's opset-11 Hardmax marks one maximum per row of the 2-D view's last axis only
    oracles = ("onnxruntime",) if opset < 13 else ("onnxruntime", "reference")
    assert_matches_oracles(one_node("Hardmax", {"x": x}, opset=opset, axis=axis), {"x": x}, oracles=oracles)


@pytest.mark.parametrize("op, attrs, match", [("Celu", {"alpha": 0.0}, "alpha must not be 0"),
                                              ("Mod", {"fmod": 2}, "fmod must be 0 or 1"),
                                              ("Hardmax", {"axis": 3}, "axis 3 is out of range")])
def test_attribute_out_of_range_names_the_node(op: str, attrs: dict, match: str) -> None:
    x = np.zeros((2, 3), np.float32)
    inputs = {"a": x, "b": x} if op == "Mod" else {"x": x}
    with pytest.raises(InvalidOpAttrError, match=f"bad_node.*{match}"):
        convert(one_node(op, inputs, name="bad_node", **attrs))


def with_parameters_frozen(model: onnx.ModelProto, inputs: list[np.ndarray], data: int = 1) -> onnx.ModelProto:
    """`model` with its graph inputs after the first `data` ones turned into initializers holding `inputs`."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    params = list(graph.input)[data:]
    graph.initializer.extend(numpy_helper.from_array(np.asarray(a), vi.name) for vi, a in zip(params, inputs[data:]))
    for vi in params:
        graph.input.remove(vi)
    return model


@pytest.mark.parametrize("case", [c for p in ("cumsum", "cumprod") for c in node_cases(p)], ids=lambda c: c[0])
def test_official_cumulative_cases_with_the_axis_frozen(case: tuple) -> None:
    """The official CumSum / CumProd node tests feed the axis as a graph input; frozen, they must pass."""
    _, model, inputs, outputs = case
    got = run_lite(session_for(with_parameters_frozen(model, inputs)), {model.graph.input[0].name: inputs[0]})
    np.testing.assert_allclose(got[model.graph.output[0].name], outputs[0], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_shrink_of_integers(dtype: type) -> None:
    x = np.arange(-6 if np.dtype(dtype).kind == "i" else 0, 7).astype(dtype)
    assert_matches_oracles(one_node("Shrink", {"x": x}, lambd=1.5, bias=0.5 if dtype != np.uint8 else 0.0),
                           {"x": x})
