"""TFLite resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE) as our variables: one tensor per
variable (container, shared_name), whose constant data is its initial value, written by Assign nodes in place
and read directly by the ops that read the variable; a session keeps it across runs (`LiteSession.
ResetVariables` restores it). The initial values are what the CALL_ONCE init subgraphs assign: constants.
"""
from __future__ import annotations

from converter.frontends.tflite.reader import GraphRecord, ModelRecord, OperatorRecord, TensorRecord
from lite.status import GraphFileError

RESOURCE_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE")
OPERANDS = {"VAR_HANDLE": (0, 1), "READ_VARIABLE": (1, 1), "ASSIGN_VARIABLE": (2, 0)}    # inputs, outputs
Key = tuple[str, str]           # (container, shared_name): the variable a VAR_HANDLE names


def check_operands(op: OperatorRecord) -> None:
    """A resource op has the tensors it takes (none of them optional): else a `GraphFileError`."""
    ins, outs = OPERANDS[op.op]
    if len(op.inputs) < ins or len(op.outputs) < outs or min((*op.inputs[:ins], *op.outputs[:outs]), default=0) < 0:
        raise GraphFileError(f"{op.op} operator {op.index} has inputs {list(op.inputs)} and outputs "
                             f"{list(op.outputs)}; it takes {ins} input(s) and {outs} output(s)")


def handle_key(op: OperatorRecord) -> Key:
    return str(op.options.get("Container") or ""), str(op.options.get("SharedName") or "")


def initial_values(file: ModelRecord, graph: GraphRecord) -> dict[Key, TensorRecord | None]:
    """What the CALL_ONCE init subgraphs of `graph` assign to each variable (the last assignment wins): the
    constant tensor, or None for a value computed there (not supported). A bad subgraph index is left to the
    CALL_ONCE rule to report."""
    values: dict[Key, TensorRecord | None] = {}
    for call in (op for op in graph.operators if op.op == "CALL_ONCE"):
        index = int(call.options.get("InitSubgraphIndex", -1))
        if not 0 < index < file.subgraphs:
            continue
        init, handles = file.graphs[index], {}
        for op in init.operators:
            if op.op in OPERANDS:
                check_operands(op)
            if op.op == "VAR_HANDLE":
                handles[op.outputs[0]] = handle_key(op)
            elif op.op == "ASSIGN_VARIABLE" and op.inputs[0] in handles:
                value = init.tensors[op.inputs[1]]
                values[handles[op.inputs[0]]] = value if value.data is not None else None
    return values
