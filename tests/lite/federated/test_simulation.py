"""The same ClientApp and ServerApp in Flower's simulation engine (lite.federated.simulation, needs ray).

The oracle is the one of the process tests: each virtual client's record of what it sent, averaged here."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the federated extra (flwr) is not installed")
pytest.importorskip("ray", reason="Flower's simulation engine needs ray: pip install 'mslite-py[simulation]'")

import tests.federated_util as fed  # noqa: E402
from lite.federated.simulation import simulate  # noqa: E402

SHARDS = [32, 48, 80, 16, 64, 32]


@pytest.mark.slow
def test_simulated_federation_yields_the_weighted_mean(tmp_path):
    """Six virtual nodes with unequal shards (more than the two ray workers run at once), two rounds of FedAvg:
    every round's global model is the example-weighted mean of what the nodes sent."""
    model = fed.lenet_train_model(tmp_path / "lenet_train.ms")
    nodes = [fed.node(model, fed.shard(tmp_path, k, n), tmp_path / f"node-{k}") for k, n in enumerate(SHARDS)]
    history = simulate(nodes, fed.run_config(model, tmp_path / "server", nodes, **{"num-rounds": 2}), cpus=2)
    assert [r["round"] for r in history["rounds"]] == [0, 1, 2]
    for server_round in (1, 2):
        sent = [fed.sent(tmp_path / f"node-{k}", server_round) for k in range(len(SHARDS))]
        assert sorted(n for _, n in sent) == sorted(SHARDS)
        exported = fed.exported(tmp_path / "server" / f"global-round-{server_round}.ms")
        for name, value in fed.weighted_mean(sent).items():
            np.testing.assert_allclose(exported[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
