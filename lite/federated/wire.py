"""The two record layouts a train request can arrive in, and the matching reply.

Flower's Message-API strategies (FedAvg, FedAdam) send `arrays` + `config` and expect `arrays` + `metrics`
back. Its secure-aggregation workflow (SecAgg+) still speaks the legacy layout — `fitins.parameters` (arrays
keyed "0", "1", ... in the model's weight order) + `fitins.config`, answered with `fitres.*` — because
`secaggplus_mod` masks the legacy `FitRes`. The client handles both; names come from the session's weight order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common import Code, FitRes, Parameters, Status
from flwr.compat.common import recorddict_compat as compat

from lite.status import InputTensorError, ParamInvalidError

LEGACY_ARRAYS, LEGACY_CONFIG = "fitins.parameters", "fitins.config"


@dataclass
class TrainRequest:
    arrays: ArrayRecord         # keyed by weight name
    config: ConfigRecord
    legacy: bool


def train_request(msg: Message, names: list[str]) -> TrainRequest:
    """The global weights (renamed to `names` when they come in the legacy layout) and the round's config."""
    content = _content(msg)
    legacy = LEGACY_ARRAYS in content.array_records
    arrays, config = (LEGACY_ARRAYS, LEGACY_CONFIG) if legacy else ("arrays", "config")
    record = _record(content.array_records, arrays, "ArrayRecord")
    config_record = _record(content.config_records, config, "ConfigRecord")
    if not legacy:
        return TrainRequest(record, config_record, False)
    if len(record) != len(names):
        raise InputTensorError(f"the global model has {len(record)} arrays, the session {len(names)} weights")
    return TrainRequest(ArrayRecord(dict(zip(names, record.values()))), config_record, True)


def evaluate_weights(msg: Message) -> ArrayRecord:
    """The global weights an evaluate request carries."""
    return _record(_content(msg).array_records, "arrays", "ArrayRecord")


def _content(msg: Message) -> RecordDict:
    if not msg.has_content():
        raise InputTensorError("the message has no content (an error message)")
    return msg.content


def _record(records: dict, key: str, kind: str):
    if key not in records:
        raise InputTensorError(f"the message has no {kind} '{key}' (it has {sorted(records)})")
    return records[key]


@dataclass
class RoundSettings:
    server_round: int
    local_epochs: int
    batch_size: int
    lr: float


def round_settings(config: ConfigRecord, default_lr: float) -> RoundSettings:
    """The round's settings from a train request's config: numbers (a bool or text is refused), defaults for
    absent keys."""
    def number(key: str, default: float, kind: type) -> float:
        value = config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
                (kind is int and value != int(value)):
            raise ParamInvalidError(f"config '{key}' is {value!r}, not {'an integer' if kind is int else 'a number'}")
        return kind(value)
    return RoundSettings(number("server-round", 0, int), number("local-epochs", 1, int),
                         number("batch-size", 32, int), number("lr", default_lr, float))


def train_reply(msg: Message, request: TrainRequest, arrays: ArrayRecord, metrics: dict[str, float],
                examples: int) -> Message:
    """The reply in the request's layout (`num-examples` is the FedAvg weight in both)."""
    if not request.legacy:
        return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord({**metrics, "num-examples": examples})}),
                       reply_to=msg)
    parameters = Parameters([a.data for a in arrays.values()], "numpy.ndarray")
    fitres = FitRes(Status(Code.OK, ""), parameters, examples, dict(metrics))
    return Message(compat.fitres_to_recorddict(fitres, keep_input=False), reply_to=msg)
