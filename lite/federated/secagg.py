"""The server side of secure aggregation: Flower's `SecAggPlusWorkflow` driving FedAvg (run config `secagg`).

SecAgg+ (Bell et al. 2020) lives in Flower's legacy workflow API, so this path uses `DefaultWorkflow` with a
legacy FedAvg; the clients' `secaggplus_mod` (lite.federated.privacy) masks each quantized update, and the server
only ever reconstructs their example-weighted sum. Individual updates are therefore invisible by design: the
per-client NaN guard of `strategies` cannot run here, so the aggregate itself is checked and a non-finite round
keeps the global model. Each client scales its weights by `num-examples / secagg-max-weight` and quantizes
them in [-`secagg-clip`, `secagg-clip`] with 2^22 levels (Flower's defaults), so `secagg-max-weight` should be
about the largest client's `num-examples`: much larger and the scaled weights drown in the quantization step.
"""
from __future__ import annotations

from logging import WARNING

import numpy as np
from flwr.app import ArrayRecord, Context
from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
from flwr.server import LegacyContext, ServerConfig
from flwr.server.strategy import FedAvg as LegacyFedAvg
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
from flwr.serverapp import Grid
from flwr.supercore import log

from lite.federated.arrays import record_views, to_array


class FiniteLegacyFedAvg(LegacyFedAvg):
    """Legacy FedAvg whose aggregate keeps the global model's dtypes (SecAgg+ dequantizes to float64), and that
    keeps the global model when the (securely summed) aggregate is not finite."""

    def __init__(self, *, dtypes: list[np.dtype], **kwargs):
        super().__init__(**kwargs)
        self.dtypes = dtypes

    def aggregate_fit(self, server_round, results, failures):
        parameters, metrics = super().aggregate_fit(server_round, results, failures)
        if parameters is None:
            return None, metrics
        arrays = [np.asarray(a, t) for a, t in zip(parameters_to_ndarrays(parameters), self.dtypes)]
        if not all(np.isfinite(a).all() for a in arrays):
            log(WARNING, "Round %s: the secure aggregate is not finite; the global model stays as it was",
                server_round)
            return None, metrics
        return ndarrays_to_parameters(arrays), metrics


def run_secure(grid: Grid, context: Context, settings, initial: ArrayRecord, report, train_config: dict) -> None:
    """`settings.num_rounds` of SecAgg+ FedAvg from `initial`; `report(round, ArrayRecord)` after every round."""
    names, views = list(initial.keys()), list(record_views(initial).values())

    def evaluate(server_round: int, ndarrays: list[np.ndarray], config: dict):
        metrics = report(server_round, ArrayRecord({n: to_array(a) for n, a in zip(names, ndarrays)}))
        return float(metrics.get("test-loss", 0.0)), dict(metrics)

    strategy = FiniteLegacyFedAvg(
        fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=settings.min_nodes,
        min_available_clients=settings.min_nodes, evaluate_fn=evaluate,
        initial_parameters=ndarrays_to_parameters(views), dtypes=[a.dtype for a in views],
        on_fit_config_fn=lambda server_round: {**train_config, "server-round": server_round})
    legacy = LegacyContext(context=context, config=ServerConfig(settings.num_rounds, settings.round_timeout),
                           strategy=strategy)
    workflow = SecAggPlusWorkflow(num_shares=1.0, reconstruction_threshold=0.67, max_weight=settings.secagg_max_weight,
                                  clipping_range=settings.secagg_clip, timeout=settings.round_timeout)
    DefaultWorkflow(fit_workflow=workflow)(grid, legacy)
