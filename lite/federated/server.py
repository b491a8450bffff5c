"""The Flower `ServerApp`: `lite.federated.server:app`.

It starts from the training `.ms` file's own initial weights (`GetFeatureMaps` of a fresh session), runs
`num-rounds` of the chosen strategy (FedAvg or FedAdam, guarded: `lite.federated.strategies`; with `secagg`,
FedAvg under SecAgg+: `lite.federated.secagg`) with `round-timeout` seconds per round, and after every round
loads the global weights into its session, exports them as an inference `.ms` (`<out-dir>/global.ms`, and
`global-round-<r>.ms` with `export-every-round`), evaluates them on `test-data` when given, logs one progress
line and rewrites `<out-dir>/history.json`.

Run config (`[tool.flwr.app.config]` of the app, `flwr run --run-config`): see `ServerSettings`.
"""
from __future__ import annotations

import json
import time
from dataclasses import MISSING, asdict, dataclass, fields
from logging import INFO
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.supercore import log

from lite.federated.arrays import load_weights, weights_record
from lite.federated.local import evaluate_locally, open_session
from lite.federated.progress import tag
from lite.federated.secagg import run_secure
from lite.federated.shards import load_shard
from lite.federated.strategies import GuardedUpdates, make_strategy
from lite.atomic_file import write_atomic
from lite.status import ParamInvalidError
from lite.train.session import MT_INFERENCE, TrainSession

app = ServerApp()


@dataclass
class ServerSettings:
    model: str                      # the training .ms: initial weights, and the graph the global model exports
    out_dir: str                    # history.json and the exported global models
    test_data: str = ""             # a shard-format .npz for central evaluation of the global model ("": none)
    num_rounds: int = 3
    strategy: str = "fedavg"        # fedavg | fedadam
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 0.002               # the clients' local learning rate
    server_lr: float = 0.01         # FedAdam's eta
    round_timeout: float = 120.0    # seconds to wait for replies in each round; later replies are dropped
    min_nodes: int = 2              # nodes that must be connected before a round starts (and are sampled)
    fraction_evaluate: float = 0.0  # share of nodes asked to evaluate the global model on their shard
    export_every_round: bool = False
    threads: int = 1
    kernels: str = "auto"           # the server session's Context.kernels ("numpy": no numba load)
    secagg: bool = False            # SecAgg+ (lite.federated.secagg): the server sees only the sum of updates
    secagg_clip: float = 8.0        # SecAgg+ quantizes weights in [-secagg-clip, secagg-clip]
    secagg_max_weight: float = 1000.0   # about the largest client's num-examples (lite.federated.secagg)

    @staticmethod
    def from_run_config(config: dict) -> "ServerSettings":
        """Settings from a run config whose keys are the field names with '-' for '_' (values cast to the
        field's type); `model` and `out-dir` are required."""
        values = {}
        for f in fields(ServerSettings):
            key = f.name.replace("_", "-")
            if key in config:
                values[f.name] = config[key] if f.default is MISSING else type(f.default)(config[key])
        missing = [f.name.replace("_", "-") for f in fields(ServerSettings) if f.default is MISSING
                   and not values.get(f.name)]
        if missing:
            raise ParamInvalidError(f"the run config needs {', '.join(missing)}")
        return ServerSettings(**values)


class RoundReport:
    """`evaluate_fn` of `Strategy.start`: export, evaluate and log the global model after every round."""

    def __init__(self, settings: ServerSettings, session: TrainSession, strategy: GuardedUpdates):
        self.settings, self.session, self.strategy = settings, session, strategy
        self.out = Path(settings.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.test = load_shard(settings.test_data) if settings.test_data else None
        self.history: list[dict] = []
        self.started = time.perf_counter()

    def __call__(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        load_weights(self.session, arrays)
        row: dict = {"round": server_round, "seconds": round(time.perf_counter() - self.started, 2),
                     "rejected": [f"node {n}: {why}" for n, why in
                                  getattr(self.strategy, "rejected", {}).get(server_round, [])]}
        if server_round > 0:
            self.session.Export(self.out / "global.ms", MT_INFERENCE)
            if self.settings.export_every_round:
                self.session.Export(self.out / f"global-round-{server_round}.ms", MT_INFERENCE)
        metrics = MetricRecord()
        if self.test is not None:
            result = evaluate_locally(self.session, *self.test)
            row.update(test_accuracy=result.accuracy, test_loss=result.loss)
            metrics = MetricRecord({"test-accuracy": result.accuracy, "test-loss": result.loss})
        self.history.append(row)
        write_atomic(self.out / "history.json", json.dumps({"settings": asdict(self.settings),
                                                            "rounds": self.history}, indent=1).encode())
        accuracy = f", global test accuracy {row['test_accuracy']:.2%}" if "test_accuracy" in row else ""
        log(INFO, "%s%s, %.1f s, %d update(s) rejected", tag(server_round, self.settings.num_rounds), accuracy,
            row["seconds"], len(row["rejected"]))
        return metrics


@app.main()
def main(grid: Grid, context: Context) -> None:
    settings = ServerSettings.from_run_config(dict(context.run_config))
    session = open_session(settings.model, settings.threads, settings.kernels)
    strategy = make_strategy(settings.strategy, min_train_nodes=settings.min_nodes,
                             min_available_nodes=settings.min_nodes,
                             min_evaluate_nodes=1 if settings.fraction_evaluate > 0 else 0,
                             fraction_evaluate=settings.fraction_evaluate,
                             **({"eta": settings.server_lr} if settings.strategy == "fedadam" else {}))
    report = RoundReport(settings, session, strategy)
    train_config = {"local-epochs": settings.local_epochs, "batch-size": settings.batch_size, "lr": settings.lr}
    train_metrics: dict[int, dict] = {}
    if settings.secagg:
        run_secure(grid, context, settings, weights_record(session), report, train_config)
    else:
        result = strategy.start(grid=grid, initial_arrays=weights_record(session), num_rounds=settings.num_rounds,
                                timeout=settings.round_timeout, train_config=ConfigRecord(train_config),
                                evaluate_fn=report)
        train_metrics = {r: dict(m) for r, m in result.train_metrics_clientapp.items()}
    for row in report.history:
        row.update({f"clients_{k.replace('-', '_')}": v for k, v in train_metrics.get(row["round"], {}).items()})
    write_atomic(report.out / "history.json", json.dumps({"settings": asdict(settings), "rounds": report.history,
                                                          "finished": True}, indent=1).encode())
