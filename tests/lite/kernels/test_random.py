"""Random ops (RandomNormal/Uniform(Like), Bernoulli, Multinomial): never folded, reproducible per session,
seeded by the node's seed, and with the distribution asked for (checked by moments and frequencies of many
draws, far outside their sampling error)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from converter import convert, to_graph
from lite.status import InvalidOpAttrError
from tests.lite.kernels.test_elementwise import model_of, one_node
from tests.util import run_lite, session_for

N = 200_000


def shaped(op: str, **attrs) -> onnx.ModelProto:
    return model_of([helper.make_node(op, [], ["y"], name="draw", **attrs)], {}, {"y": np.float32})


def draws(model: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None, runs: int = 1) -> list[np.ndarray]:
    session = session_for(model)
    return [run_lite(session, feeds or {})["y"] for _ in range(runs)]


def test_random_ops_are_never_folded_into_constants() -> None:
    graph = to_graph(shaped("RandomNormal", shape=[3, 4]))
    assert [n.op for n in graph.nodes] == ["Random"]


def test_draws_are_reproducible_per_session_and_differ_between_runs() -> None:
    model = shaped("RandomUniform", shape=[64])
    first, second = draws(model, runs=2)
    assert not np.array_equal(first, second)
    again = draws(model, runs=2)
    assert np.array_equal(first, again[0]) and np.array_equal(second, again[1])


def test_the_seed_attribute_picks_the_sequence() -> None:
    a, b, c = (draws(shaped("RandomNormal", shape=[64], seed=s))[0] for s in (1.0, 1.0, 2.0))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16])
def test_random_normal_has_the_mean_and_scale_asked_for(dtype: int) -> None:
    model = model_of([helper.make_node("RandomNormal", [], ["y"], shape=[N], mean=2.0, scale=3.0, dtype=dtype)],
                     {}, {"y": helper.tensor_dtype_to_np_dtype(dtype)})
    (y,) = draws(model)
    assert y.dtype == helper.tensor_dtype_to_np_dtype(dtype)
    assert abs(y.astype(np.float64).mean() - 2.0) < 0.05 and abs(y.astype(np.float64).std() - 3.0) < 0.05


def test_random_uniform_like_takes_the_shape_and_dtype_of_its_input() -> None:
    x = np.zeros((N // 100, 100), np.float64)
    model = model_of([helper.make_node("RandomUniformLike", ["x"], ["y"], low=-1.0, high=3.0)], {"x": x},
                     {"y": np.float64})
    (y,) = draws(model, {"x": x})
    assert y.shape == x.shape and y.dtype == np.float64
    assert y.min() >= -1.0 and y.max() < 3.0 and abs(y.mean() - 1.0) < 0.02


def test_random_normal_like_with_a_dtype() -> None:
    x = np.zeros((4, 5), np.float32)
    model = one_node("RandomNormalLike", {"x": x}, out_dtype=np.float64, dtype=TensorProto.DOUBLE)
    (y,) = draws(model, {"x": x})
    assert y.shape == (4, 5) and y.dtype == np.float64 and np.unique(y).size == 20


def test_bernoulli_frequency_follows_the_probabilities() -> None:
    p = np.tile(np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32), (N // 5, 1))
    (y,) = draws(one_node("Bernoulli", {"p": p}), {"p": p})
    assert set(np.unique(y)) <= {0.0, 1.0}
    np.testing.assert_allclose(y.mean(axis=0), [0.0, 0.1, 0.5, 0.9, 1.0], atol=0.01)


def test_multinomial_frequencies_follow_the_softmax_of_the_logits() -> None:
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.0, 0.5]])
    logits = np.log(np.maximum(probs, 1e-30)).astype(np.float32)
    model = model_of([helper.make_node("Multinomial", ["x"], ["y"], sample_size=N // 10, dtype=TensorProto.INT64)],
                     {"x": logits}, {"y": np.int64})
    (y,) = draws(model, {"x": logits})
    assert y.shape == (2, N // 10) and y.dtype == np.int64
    frequencies = np.stack([np.bincount(row, minlength=3) / row.size for row in y])
    np.testing.assert_allclose(frequencies, probs, atol=0.01)


def test_random_needs_a_shape() -> None:
    with pytest.raises(InvalidOpAttrError, match="draw.*'shape' is required"):
        convert(model_of([helper.make_node("RandomNormal", [], ["y"], name="draw")], {}, {"y": np.float32}))
