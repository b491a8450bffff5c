"""onnxruntime's run of an ONNX model, dumped in `lite.dump`'s format, to compare with a dump of its `.ms`:

    python -m converter.ort_dump model.onnx dump_ort --input input=x.npy [--saved-data tensor]
    python -m lite.dump compare dump_ort dump_ours

Every node output becomes a graph output so onnxruntime returns it; tensor names are the ONNX value names, which
the converter keeps for the outputs of the nodes it imports (fused nodes keep the last fused node's name).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import onnx

from lite.dump import Dump
from lite.session import CallBackParam


def _with_every_output(model: onnx.ModelProto) -> onnx.ModelProto:
    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    present = {o.name for o in exposed.graph.output}
    for node in exposed.graph.node:
        for out in node.output:
            if out and out not in present:
                exposed.graph.output.append(typed.get(out) or onnx.helper.make_empty_tensor_value_info(out))
                present.add(out)
    return exposed


def dump_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray], dump: Dump) -> None:
    """One onnxruntime run of `model` on `feeds`, every node's outputs recorded in `dump` (execution order)."""
    import onnxruntime as ort
    session = ort.InferenceSession(_with_every_output(model).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(names, feeds)))
    for node in model.graph.node:
        param = CallBackParam(node.name, node.op_type)
        if dump.selects(param):
            for slot, out in enumerate(o for o in node.output if o in values):
                dump.record(param, "output", slot, out, values[out])
    dump.iteration += 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m converter.ort_dump", description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--input", action="append", default=[], help="name=file.npy, one per graph input")
    parser.add_argument("--saved-data", default="tensor", choices=("statistic", "tensor", "full"))
    args = parser.parse_args(argv)
    feeds = {}
    for item in args.input:
        name, _, file = item.partition("=")
        feeds[name] = np.load(file)
    with Dump(args.folder, saved_data=args.saved_data) as dump:
        dump_onnxruntime(onnx.load(args.model), feeds, dump)
    print(f"dumped {len(args.folder.joinpath('statistic.jsonl').read_text().splitlines())} tensors to {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
