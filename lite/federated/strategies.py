"""Flower's FedAvg and FedAdam, each behind a guard that keeps bad client updates out of the global model.

Failure handling is split the way Flower splits it: a client that dies or is slower than the round's timeout
simply has no reply in `Strategy.start`'s `send_and_receive` (or an error reply, which FedAvg skips); the guard
here drops every reply that did arrive but must not be averaged — NaN/Inf weights, missing or extra weights,
wrong shapes, no positive `num-examples` — and logs who was dropped and why. The aggregate keeps the global
model's dtypes; a round where nothing valid came back leaves the global model as it was.
"""
from __future__ import annotations

from collections.abc import Iterable
from logging import WARNING

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAdam as FlowerFedAdam
from flwr.serverapp.strategy import FedAvg as FlowerFedAvg
from flwr.supercore import log

from lite.federated.arrays import non_finite, record_views, to_array
from lite.status import ParamInvalidError


def reply_problem(content, expected: dict[str, tuple[tuple[int, ...], np.dtype]], weight_key: str) -> str | None:
    """Why a train reply's content cannot be averaged into a model with `expected` {name: (shape, dtype)}, or
    None when it can."""
    if len(content.array_records) != 1 or len(content.metric_records) != 1:
        return "it needs exactly one ArrayRecord and one MetricRecord"
    record = next(iter(content.array_records.values()))
    metrics = next(iter(content.metric_records.values()))
    examples = metrics.get(weight_key)
    if not isinstance(examples, (int, float)) or not np.isfinite(examples) or examples <= 0:
        return f"its '{weight_key}' is {examples!r}, not a positive number"
    if set(record.keys()) != set(expected):
        return f"its weights {sorted(record.keys())} are not the global model's {sorted(expected)}"
    try:
        views = record_views(record)
    except Exception as e:          # noqa: BLE001 - any undecodable array disqualifies the reply
        return f"its arrays cannot be read: {e}"
    wrong = next((n for n, a in views.items() if a.shape != expected[n][0]), None)
    if wrong is not None:
        return f"weight '{wrong}' has shape {list(views[wrong].shape)}, not {list(expected[wrong][0])}"
    wrong = next((n for n, a in views.items() if a.dtype != expected[n][1]), None)
    if wrong is not None:
        return f"weight '{wrong}' has dtype {views[wrong].dtype}, not {expected[wrong][1]}"
    bad = non_finite(record)
    return f"weight '{bad}' holds NaN or Inf" if bad is not None else None


class GuardedUpdates:
    """Mixin for a Message-API strategy: averages only the train replies `reply_problem` accepts.

    `rejected[round]` lists (node id, reason) of every dropped reply, for the server's progress report."""

    weighted_by_key: str

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._expected = {n: (a.shape, a.dtype) for n, a in record_views(arrays).items()}
        self.rejected: dict[int, list[tuple[int, str]]] = getattr(self, "rejected", {})
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        kept, dropped = [], []
        for msg in replies:                 # error replies pass on: Flower's FedAvg logs and skips them
            problem = None if msg.has_error() else reply_problem(msg.content, self._expected, self.weighted_by_key)
            if problem is None:
                kept.append(msg)
            else:
                dropped.append((msg.metadata.src_node_id, problem))
                log(WARNING, "Rejected the update of node %s in round %s: %s", msg.metadata.src_node_id,
                    server_round, problem)
        self.rejected[server_round] = dropped
        arrays, metrics = super().aggregate_train(server_round, kept)
        if arrays is None:
            return None, metrics
        cast = ArrayRecord({n: to_array(np.asarray(a, self._expected[n][1])) for n, a in record_views(arrays).items()})
        if non_finite(cast) is not None:
            log(WARNING, "Round %s: the aggregate is not finite; the global model stays as it was", server_round)
            return None, metrics
        return cast, metrics


class FedAvg(GuardedUpdates, FlowerFedAvg):
    """FedAvg (McMahan et al. 2017): the example-weighted mean of the accepted client weights."""


class FedAdam(GuardedUpdates, FlowerFedAdam):
    """FedAdam (Reddi et al. 2021): the mean client update drives a server-side Adam step (`eta`, `tau`)."""


STRATEGIES = {"fedavg": FedAvg, "fedadam": FedAdam}


def make_strategy(name: str, **kwargs) -> FlowerFedAvg:
    """A guarded strategy by name (`fedavg`, `fedadam`); keyword arguments go to Flower's constructor."""
    if name not in STRATEGIES:
        raise ParamInvalidError(f"unknown strategy '{name}': use one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](**kwargs)
