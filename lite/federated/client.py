"""The Flower `ClientApp` around a `TrainSession`: `lite.federated.client:app`.

Each train message: a fresh session over the node's training `.ms`, the global weights in through
`UpdateFeatureMaps`, `local-epochs` of `TrainLoop` over the node's shard, the weights out through
`GetFeatureMaps` with `train-loss`, `train-accuracy` and `num-examples` (the FedAvg weight). Each evaluate
message: the global weights on the node's shard in `Eval()` mode (`eval-loss`, `eval-accuracy`,
`num-examples`). A SuperNode starts a new ClientApp process per message, so nothing is carried between rounds
but the weights (as in FedAvg: local optimizer state starts fresh each round).

Node config (`flower-supernode --node-config`): `model` (the training `.ms`), `shard` (the node's `.npz`, see
`lite.federated.shards`), optional `threads` (BLAS threads, default 1), `kernels` (`Context.kernels`, default
"auto"; "numpy" spares each per-message process loading numba), `record-dir` (write each sent update to
`<record-dir>/round-<r>.npz`: an audit trail of exactly what left the device) and `fault` (failure drills: `nan`
sends NaN weights, `exit` dies mid-round, `slow=<s>` answers after s seconds).
"""
from __future__ import annotations

import io
import os
import time
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from lite.federated.arrays import load_weights, record_views, weights_record
from lite.federated.local import evaluate_locally, open_session, train_locally
from lite.federated.privacy import privacy_mods
from lite.federated.shards import load_shard
from lite.federated.wire import evaluate_weights, round_settings, train_reply, train_request
from lite.atomic_file import write_atomic
from lite.status import ParamInvalidError
from lite.train.session import TrainSession

app = ClientApp(mods=privacy_mods())


def _node_value(context: Context, key: str, default: object = None) -> object:
    value = context.node_config.get(key, default)
    if value is None:
        raise ParamInvalidError(f"node config '{key}' is not set (flower-supernode --node-config '{key}=...')")
    return value


def _session(context: Context, weights: ArrayRecord | None = None) -> TrainSession:
    session = open_session(str(_node_value(context, "model")), int(_node_value(context, "threads", 1)),
                           str(_node_value(context, "kernels", "auto")))
    if weights is not None:
        load_weights(session, weights)
    return session


def _fault(context: Context) -> str:
    return str(context.node_config.get("fault", ""))


def _break(context: Context, session: TrainSession) -> None:
    """The node's `exit` or `nan` fault, if any (failure drills for the server's failure handling)."""
    if _fault(context) == "exit":
        os._exit(3)                              # dies mid-round: no reply at all
    if _fault(context) == "nan":
        session.GetFeatureMaps()[0].MutableData()[...] = np.nan


def _delay(context: Context) -> None:
    """The node's `slow=<seconds>` fault: the reply leaves that much later."""
    if _fault(context).startswith("slow="):
        time.sleep(float(_fault(context).split("=", 1)[1]))


def _record(context: Context, server_round: int, arrays: ArrayRecord, examples: int) -> None:
    folder = context.node_config.get("record-dir")
    if folder:
        Path(str(folder)).mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, __examples__=np.int64(examples), **record_views(arrays))
        write_atomic(Path(str(folder)) / f"round-{server_round}.npz", buffer.getvalue())


@app.train()
def train(msg: Message, context: Context) -> Message:
    session = _session(context)
    request = train_request(msg, [t.tensor_name() for t in session.GetFeatureMaps()])
    settings = round_settings(request.config, session.GetLearningRate())
    load_weights(session, request.arrays)
    x, y = load_shard(str(_node_value(context, "shard")))
    server_round = settings.server_round
    result = train_locally(session, x, y, epochs=settings.local_epochs, batch_size=settings.batch_size,
                           learning_rate=settings.lr, seed=server_round)
    _break(context, session)
    arrays = weights_record(session)
    _record(context, server_round, arrays, result.examples)
    _delay(context)
    return train_reply(msg, request, arrays, {"train-loss": result.loss, "train-accuracy": result.accuracy},
                       result.examples)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    session = _session(context, evaluate_weights(msg))
    x, y = load_shard(str(_node_value(context, "shard")))
    result = evaluate_locally(session, x, y)
    metrics = MetricRecord({"eval-loss": result.loss, "eval-accuracy": result.accuracy,
                            "num-examples": result.examples})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
