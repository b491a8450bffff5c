"""Scan (ONNX semantics): run the body once per slice along the scan axis of every scan input, forwards or in
reverse, carrying the states; each step's output slices are stacked along each scan output's axis (in reverse
for a reversed output). `batched` (ONNX Scan-8): axis 0 of every state, scan input and output is a batch axis,
each batch element scanned on its own.

Static when the compiled body keeps the states' shapes: the scan length comes from the input shapes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import TensorSpec, register
from lite.kernels.control_flow.body import ControlFlowKernel, same_specs, spec_of
from lite.traits import Bodies, declare

declare("Scan", bodies=Bodies(("body",)))


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _drop(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return shape[:axis] + shape[axis + 1:]


@register("Scan")
class ScanKernel(ControlFlowKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a = self.attrs
        m, c = a.num_scan_inputs, a.implicit_inputs
        self.states = n = len(inputs) - m - c
        k = len(self.node.outputs) - n
        if n < 0 or k < 0 or any(s is None for s in inputs):
            raise self.error(f"{len(inputs)} inputs ({m} scanned, {c} captured) do not fit "
                             f"{len(self.node.outputs)} outputs")
        batched = 1 if a.batched else 0
        if batched and any(s.rank == 0 or s.shape[0] != inputs[0].shape[0] for s in inputs[:n + m]):
            raise self.error("every state and scan input needs the same batch size on axis 0")
        per = [TensorSpec(s.shape[batched:], s.dtype) for s in inputs[:n + m]]
        self.in_axes = [_axis(x, s.rank) for x, s in zip(self._list(a.scan_input_axes, m), per[n:])]
        self.in_reverse = self._list(a.scan_input_directions, m)
        self.out_reverse = self._list(a.scan_output_directions, k)
        if any(not 0 <= x < s.rank for x, s in zip(self.in_axes, per[n:])):
            raise self.error(f"scan_input_axes {list(a.scan_input_axes)} do not fit the scan inputs")
        lengths = {s.shape[x] for x, s in zip(self.in_axes, per[n:])}
        if len(lengths) > 1:
            raise self.error(f"the scan inputs have different lengths {sorted(lengths)} along their axes")
        self.length = lengths.pop() if lengths else 0
        self.result = None
        slices = [TensorSpec(_drop(s.shape, x), s.dtype) for x, s in zip(self.in_axes, per[n:])]
        body = self.body(0, [*per[:n], *slices, *inputs[n + m:]])
        outs = body.output_specs()
        if outs is not None and same_specs(outs[:n], per[:n]):
            self.out_axes = [_axis(x, s.rank + 1) for x, s in zip(self._list(a.scan_output_axes, k), outs[n:])]
            if any(not 0 <= x <= s.rank for x, s in zip(self.out_axes, outs[n:])):
                raise self.error(f"scan_output_axes {list(a.scan_output_axes)} do not fit the scan outputs")
            lead = inputs[0].shape[:1] if batched else ()
            scans = [TensorSpec(s.shape[:x] + (self.length,) + s.shape[x:], s.dtype)
                     for x, s in zip(self.out_axes, outs[n:])]
            return [TensorSpec(lead + s.shape, s.dtype) for s in [*outs[:n], *scans]]
        return self.keep(self.scan_all(self.values(inputs, "an input (the scan's shapes are known only by "
                                                          "running it)")))

    def _list(self, values: Sequence[int], count: int) -> list[int]:
        """An axes / directions attribute with one entry per scan input or output (empty: zeros)."""
        values = list(values) or [0] * count
        if len(values) != count:
            raise self.error(f"{len(values)} scan axes or directions given for {count} scan inputs or outputs")
        return values

    def scan_all(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Every output, over the batch elements of a batched scan."""
        n, m = self.states, self.attrs.num_scan_inputs
        if not self.attrs.batched:
            return self.scan(list(values[:n]), values[n:n + m], values[n + m:])
        each = [self.scan([x[b] for x in values[:n]], [x[b] for x in values[n:n + m]], values[n + m:])
                for b in range(values[0].shape[0])]
        return [np.stack(outs) for outs in zip(*each)]

    def scan(self, states: list[np.ndarray], scans: Sequence[np.ndarray],
             captured: Sequence[np.ndarray]) -> list[np.ndarray]:
        """One scan: the final states, then each scan output."""
        n, length = self.states, self.length
        steps: list[list[np.ndarray]] = [[] for _ in self.node.outputs[n:]]
        views = [np.moveaxis(x, axis, 0) for x, axis in zip(scans, self.in_axes)]
        for t in range(length):
            slices = [v[length - 1 - t if rev else t] for v, rev in zip(views, self.in_reverse)]
            body = self.body(0, [*map(spec_of, states), *map(spec_of, slices), *map(spec_of, captured)])
            outs = body.run([*states, *slices, *captured])
            states = [np.array(o) for o in outs[:n]]
            for acc, s in zip(steps, outs[n:]):
                acc.append(np.array(s))
        axes = [_axis(x, acc[0].ndim + 1) for x, acc in zip(self._list(self.attrs.scan_output_axes, len(steps)), steps)]
        stacked = [np.stack(acc[::-1] if rev else acc, axis=x) for acc, rev, x in zip(steps, self.out_reverse, axes)]
        return [*states, *stacked]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.copy_result(outputs):
            return
        if self.length == 0:        # no step: the states pass through, the scan outputs are empty
            for out, value in zip(outputs, inputs[:self.states]):
                np.copyto(out, value)
            return
        for out, value in zip(outputs, self.scan_all(inputs)):
            np.copyto(out, value)
