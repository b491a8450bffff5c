"""What If, Loop and Scan share: a body compiled once per signature of input shapes and dtypes, then run on
given values.

A body is compiled by the same compiler as the main graph (`compile_graph` on its `SubGraphDef`): shapes
inferred and folded, kernels chosen, memory planned in an arena of its own, steps prebound; its own dynamic part
runs after its static steps. Running it copies the values into its input arrays and runs its steps; the outputs
are views into its arena, valid until its next run.

A control-flow node whose output shapes the compiled bodies fix (an If whose branches agree, a Loop whose
carried values keep their shapes and whose trip count is known, a Scan) is static: `run` executes the bodies into
the planned outputs. Otherwise its shapes are known only by running it, so `infer` needs every input's value
(`known`: the node runs in the session's dynamic part), executes the bodies and keeps the results for `run`
to copy out, as NonZero does.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite import dtypes
from lite.compiler import compile_graph
from lite.kernel import Kernel, TensorSpec
from lite.model import SubGraphDef
from lite.status import LiteError, OpExecuteError


class Body:
    """One subgraph compiled for one signature of its inputs."""

    def __init__(self, sub: SubGraphDef, inputs: Sequence[TensorSpec]):
        self.sub = sub
        self.plan = compile_graph(sub.model, {t: tuple(s.shape) for t, s in zip(sub.inputs, inputs)}, sub)
        self.input_arrays = [self.plan.arrays[t] for t in sub.inputs]

    def output_specs(self) -> list[TensorSpec] | None:
        """The outputs' shapes and dtypes when compiling fixed them, else None (outputs of its dynamic part)."""
        specs = [self.plan.specs[t] for t in self.sub.outputs]
        if any(s is None for s in specs):
            return None
        return [TensorSpec(tuple(s.shape), s.dtype) for s in specs]

    def run(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run on `values` (one per input); the outputs are views valid until the next run."""
        for array, value in zip(self.input_arrays, values):
            np.copyto(array, value)
        step = None
        try:
            for step in self.plan.steps:
                step.kernel.run(step.inputs, step.outputs)
        except LiteError:
            raise
        except Exception as e:
            raise OpExecuteError(f"{step.node.op} node '{step.node.name}' of subgraph '{self.sub.name}' failed: "
                                 f"{e}") from e
        dynamic = self.plan.dynamic
        if dynamic is not None:
            dynamic.run()
        return [dynamic.arrays[t] if dynamic is not None and t in dynamic.arrays else self.plan.arrays[t]
                for t in self.sub.outputs]


def spec_of(array: np.ndarray) -> TensorSpec:
    return TensorSpec(tuple(array.shape), array.dtype)


class ControlFlowKernel(Kernel):
    """Base of the control-flow kernels: bodies compiled on demand and cached by input signature. Data types
    pass through as they are (`native_dtypes`): the bodies' own kernels choose how to compute them."""

    native_dtypes = True

    def __init__(self, node):
        super().__init__(node)
        self.signatures: dict[tuple, Body] = {}     # not `compiled`: the kernel's flag of a compiled kernel
        self.result: list[np.ndarray] | None = None     # outputs computed while inferring (shapes known by running)

    def body(self, k: int, inputs: Sequence[TensorSpec]) -> Body:
        """Body `k` of the node (`traits(op).bodies` order) compiled for `inputs`, whose dtypes must be those the
        body declares."""
        sub = self.node.bodies[k]
        key = (k, *((tuple(s.shape), s.dtype) for s in inputs))
        if key not in self.signatures:
            for t, spec in zip(sub.inputs, inputs):
                declared = dtypes.to_numpy(sub.model.tensors[t].data_type)
                if spec.dtype != declared:
                    raise self.error(f"subgraph '{sub.name}' input '{sub.model.tensors[t].name}' is {declared}, "
                                     f"but it is given {spec.dtype}")
            self.signatures[key] = Body(sub, inputs)
        return self.signatures[key]

    def keep(self, outputs: Sequence[np.ndarray]) -> list[TensorSpec]:
        """Keep outputs computed in `infer` for `run` to copy out; their specs."""
        self.result = [np.array(a) for a in outputs]
        return [spec_of(a) for a in self.result]

    def copy_result(self, outputs: Sequence[np.ndarray]) -> bool:
        """Copy the kept outputs, if `infer` computed them; False when `run` must execute the bodies."""
        if self.result is None:
            return False
        for out, value in zip(outputs, self.result):
            np.copyto(out, value)
        return True

    def element(self, value: np.ndarray, what: str) -> np.generic:
        """The single element of a condition or count tensor."""
        flat = np.asarray(value).reshape(-1)
        if flat.size != 1:
            raise self.error(f"{what} must hold one element, it has shape {list(np.shape(value))}")
        return flat[0]

    def truth(self, value: np.ndarray, what: str) -> bool:
        return bool(self.element(value, what))

    def values(self, inputs: Sequence[TensorSpec | None], what: str) -> list[np.ndarray | None]:
        """Every input's value (InferInvalidError until they are known: the node then runs dynamically)."""
        return [None if s is None else self.known(s, what) for s in inputs]


def same_specs(a: Sequence[TensorSpec], b: Sequence[TensorSpec]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))
