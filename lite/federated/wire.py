"""The two record layouts a train request can arrive in, and the matching reply.

Flower's Message-API strategies (FedAvg, FedAdam) send `arrays` + `config` and expect `arrays` + `metrics`
back. Its secure-aggregation workflow (SecAgg+) still speaks the legacy layout — `fitins.parameters` (arrays
keyed "0", "1", ... in the model's weight order) + `fitins.config`, answered with `fitres.*` — because
`secaggplus_mod` masks the legacy `FitRes`. The client handles both; names come from the session's weight order.
"""
from __future__ import annotations

from dataclasses import dataclass

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common import Code, FitRes, Parameters, Status
from flwr.compat.common import recorddict_compat as compat

from lite.status import InputTensorError

LEGACY_ARRAYS, LEGACY_CONFIG = "fitins.parameters", "fitins.config"


@dataclass
class TrainRequest:
    arrays: ArrayRecord         # keyed by weight name
    config: ConfigRecord
    legacy: bool


def train_request(msg: Message, names: list[str]) -> TrainRequest:
    """The global weights (renamed to `names` when they come in the legacy layout) and the round's config."""
    content = msg.content
    if LEGACY_ARRAYS not in content.array_records:
        return TrainRequest(content.array_records["arrays"], content.config_records["config"], False)
    record = content.array_records[LEGACY_ARRAYS]
    if len(record) != len(names):
        raise InputTensorError(f"the global model has {len(record)} arrays, the session {len(names)} weights")
    return TrainRequest(ArrayRecord(dict(zip(names, record.values()))), content.config_records[LEGACY_CONFIG],
                        True)


def train_reply(msg: Message, request: TrainRequest, arrays: ArrayRecord, metrics: dict[str, float],
                examples: int) -> Message:
    """The reply in the request's layout (`num-examples` is the FedAvg weight in both)."""
    if not request.legacy:
        return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord({**metrics, "num-examples": examples})}),
                       reply_to=msg)
    parameters = Parameters([a.data for a in arrays.values()], "numpy.ndarray")
    fitres = FitRes(Status(Code.OK, ""), parameters, examples, dict(metrics))
    return Message(compat.fitres_to_recorddict(fitres, keep_input=False), reply_to=msg)
