"""If: run the then- or the else-branch on the captured values, as the condition (one bool element) says.

The branches may return different shapes (ONNX allows it): when both compiled branches fix equal output shapes
the node is static, and only the taken branch runs; otherwise the condition must be known to infer the shapes,
so the node runs in the session's dynamic part. A condition that is a constant picks its branch at compile
time (the converter already inlines such a branch).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import TensorSpec, register
from lite.kernels.control_flow.body import Body, ControlFlowKernel, same_specs
from lite.status import NotSupportedError
from lite.traits import Bodies, declare

declare("If", bodies=Bodies(("then_branch", "else_branch"), inputs_from=1))


@register("If")
class IfKernel(ControlFlowKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        cond, captured = inputs[0], list(inputs[1:])
        if cond is None:
            raise self.error("the condition is missing", NotSupportedError)
        self.result, self.taken = None, None
        self.branches: list[Body] = []
        if cond.value is None:
            self.branches = [self.body(k, captured) for k in (0, 1)]
            specs = [b.output_specs() for b in self.branches]
            if specs[0] is not None and specs[1] is not None and same_specs(specs[0], specs[1]):
                return specs[0]
            self.known(cond, "the condition (the branches return different shapes)")
        self.taken = self.body(0 if self.truth(cond.value, "the condition") else 1, captured)
        specs = self.taken.output_specs()
        if specs is None:       # the branch's shapes are known only by running it
            return self.keep(self.taken.run(self.values(captured, "a captured value")))
        return specs

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        if self.copy_result(outputs):
            return
        taken = self.taken or self.branches[0 if self.truth(inputs[0], "the condition") else 1]
        for out, value in zip(outputs, taken.run(inputs[1:])):
            np.copyto(out, value)
