"""Federated training on Flower around `TrainSession` (optional: `pip install mslite-py[federated]`).

`client` (the ClientApp: local epochs on the node's shard), `server` (the ServerApp: FedAvg/FedAdam from the
model's initial weights, the global model exported as an inference `.ms` after every round), `strategies`
(the guard against NaN/Inf and malformed updates), `secagg` (FedAvg under SecAgg+), `arrays` (weights <->
Flower records), `wire` (the two request layouts a client answers), `privacy` (client-side DP, SecAgg+ mod),
`shards` (non-IID splits and the per-node data files), `local` (one client's round without Flower), `launch`
(a SuperLink and N SuperNodes as processes on 127.0.0.1), `simulation` (the same apps in Flower's simulation
engine, with ray), `progress` (the server's one line per round, rounds numbered from 1).
The runtime core (`lite` without this package) never imports Flower.
"""
from pathlib import Path

APP_DIR = Path(__file__).resolve().parent / "mslite-fl"     # the Flower App that `flwr run` ships
