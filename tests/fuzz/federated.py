"""The federated messages: a Flower `Message` protobuf as the SuperLink relays it, read by each of our handlers —
the client's train request (both record layouts, with the round's config) and evaluate request into a
`TrainSession` over the `ms` corpus's training file, and the server's guard over a train reply, then FedAvg's
aggregate of a reply it accepts. Bytes that Flower's own deserializer refuses never reach our code, so they end
the input quietly."""
from __future__ import annotations

import logging
from pathlib import Path

from flwr.app import ArrayRecord, Message
from flwr.common.serde import message_from_proto
from flwr.proto.message_pb2 import Message as MessageProto

from lite.context import Context
from lite.federated.arrays import load_weights, record_views, to_array
from lite.federated.strategies import FedAvg, reply_problem
from lite.federated.wire import evaluate_weights, round_settings, train_request
from lite.status import LiteError
from lite.train.session import TrainSession
from tests.fuzz.contract import contract

MODEL = Path(__file__).parent / "corpus" / "ms" / "training.ms"
SESSION = TrainSession.CreateSession(str(MODEL), Context(kernels="numpy"))
NAMES = [t.tensor_name() for t in SESSION.GetFeatureMaps()]
GLOBAL = ArrayRecord({t.tensor_name(): to_array(t.MutableData().copy()) for t in SESSION.GetFeatureMaps()})
EXPECTED = {n: (a.shape, a.dtype) for n, a in record_views(GLOBAL).items()}
logging.getLogger("flwr").setLevel(logging.ERROR)        # Flower logs every aggregate at INFO


def message(data: bytes) -> Message | None:
    """The message Flower hands over, or None where its deserializer refuses the bytes."""
    try:
        return message_from_proto(MessageProto.FromString(data))
    except Exception:               # noqa: BLE001 - the transport's refusal, before any of our code runs
        return None


def _client_train(msg: Message) -> None:
    request = train_request(msg, NAMES)
    round_settings(request.config, SESSION.GetLearningRate())
    load_weights(SESSION, request.arrays)


def _client_evaluate(msg: Message) -> None:
    load_weights(SESSION, evaluate_weights(msg))


def _server_aggregate(msg: Message) -> None:
    if msg.has_error() or reply_problem(msg.content, EXPECTED, "num-examples") is not None:
        return
    strategy = FedAvg()
    strategy._expected, strategy.rejected = EXPECTED, {}
    strategy.aggregate_train(1, [msg])


def _read(data: bytes) -> None:
    """One message through each handler; each may refuse it with a LiteError on its own."""
    msg = message(data)
    if msg is None:
        return
    for handle in (_client_train, _client_evaluate, _server_aggregate):
        try:
            handle(msg)
        except LiteError:
            pass


TestOneInput = contract(_read)
