"""`LiteSession`: compile a model once, then run it with no lookups or allocations per run."""
from __future__ import annotations

import functools
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from lite import dtypes, gc_pause, variables
from lite.atomic_file import write_atomic
from lite.compiler import ExecutionPlan, compile_graph
from lite.context import Context
from lite.kernel import check_mode, float16_compute, selection, startup_seconds
from lite.model import Model, NodeDef, SubGraphDef, TensorDef
from lite.signatures import local_name, signatures
from lite.status import (RET_OK, RET_SUCCESS_EXIT, InputTensorError, LiteError, OpExecuteError,
                         ParamInvalidError, ReentrantError)
from lite.tensor import MSTensor
from lite.threads import compiled_first, split, thread_limit
from schema.train_format import EVAL


@dataclass(frozen=True)
class CallBackParam:
    node_name: str
    node_type: str


KernelCallBack = Callable[[list[MSTensor], list[MSTensor], CallBackParam], bool]
Method = TypeVar("Method", bound=Callable[..., Any])


def exclusive(method: Method) -> Method:
    """One call at a time per session (MindSpore Lite's contract): a second thread, or a callback of the running
    call, gets `ReentrantError` (RET_REENTRANT_ERROR) instead of sharing the session's buffers. Calls that nest
    within one thread (a subclass calling its base) are one call."""
    @functools.wraps(method)
    def guarded(self: "LiteSession", *args: Any, **kwargs: Any) -> Any:
        if self._in_callback or not self._guard.acquire(blocking=False):
            raise ReentrantError(f"{method.__name__}: the session is busy with another call (from another "
                                 f"thread or from one of its callbacks); use one session per thread")
        try:
            return method(self, *args, **kwargs)
        finally:
            self._guard.release()
    return guarded  # type: ignore[return-value]


class LiteSession:
    """Runs one compiled model. Create it with `CreateSession(context)` + `CompileGraph(model)`, or with
    `CreateSession(model_buf, size, context)` to import and compile in one call."""

    def __init__(self, context: Context | None = None):
        self.context = context or Context()
        if not isinstance(self.context, Context):
            raise ParamInvalidError(f"context must be a lite.Context, got {type(self.context).__name__}")
        self.device = self.context.resolve_device()
        self.float16 = bool(getattr(self.device.device_info, "enable_float16", False))
        check_mode(self.context.kernels)
        self._model: Model | None = None
        self._graph: Model | SubGraphDef | None = None
        self._signature: str | None = None          # the entry point `_graph` is (lite.signatures)
        self._plan: ExecutionPlan | None = None
        self._tensors: dict[int, MSTensor] = {}
        self._state: dict[int, np.ndarray] = {}     # the variables the graph writes (Assign), session-owned
        self._sized_plans: dict[tuple, ExecutionPlan] | None = None   # by input shapes, for unknown input dims
        self._unfixed: set[int] = set()     # inputs (of any entry point) whose unknown dims are not fixed yet
        # SelectSignature: each entry point not selected now, with its plan and plans by size as it left them
        self._kept: dict[str | None, tuple[ExecutionPlan | None, dict[tuple, ExecutionPlan] | None]] = {}
        self._node_io: list[tuple[list[MSTensor], list[MSTensor], CallBackParam]] | None = None
        self._guard = threading.RLock()
        self._in_callback = False
        self.jit_seconds = 0.0     # starting a backend (numba) and preparing its kernels in the last compile or Resize

    @staticmethod
    def CreateSession(*args, dec_key: str | bytes | None = None) -> "LiteSession":
        """`CreateSession(context)` or `CreateSession(model_buf, size, context)`; an encrypted model buffer needs
        its key `dec_key`."""
        if len(args) <= 1:
            if dec_key is not None:
                raise ParamInvalidError("dec_key goes with a model buffer: CreateSession(model_buf, size, context)")
            return LiteSession(args[0] if args else None)
        if len(args) != 3:
            raise ParamInvalidError("CreateSession takes (context) or (model_buf, size, context)")
        buf, size, context = args
        session = LiteSession(context)
        session.CompileGraph(Model.Import(buf, size, dec_key))
        return session

    # ---- compile ------------------------------------------------------------------------------------------
    @exclusive
    def CompileGraph(self, model: Model) -> int:
        if not isinstance(model, Model):
            raise ParamInvalidError(f"CompileGraph needs a lite.Model, got {type(model).__name__}")
        self._model = model
        entries = signatures(model)
        self._signature = next(iter(entries), None)     # a model with signatures: the default entry point
        self._graph = model.subgraphs.get(EVAL) or entries.get(self._signature) or model   # training: the forward
        self._state = variables.start_values(model, variables.written(model, [self._graph, *entries.values()]))
        self._kept, self._unfixed = {}, set()
        self._plan_graph()
        return RET_OK

    @exclusive
    def SelectSignature(self, key: str) -> int:
        """Make entry point `key` of a model with several (LiteRT's `get_signature_runner(key)`) the graph that
        `RunGraph`, `GetInputs` and `GetOutputs` use, its inputs and outputs named as its signature names them.
        An entry point is compiled the first time it is selected; its plans are kept, so selecting it again
        compiles nothing. As LiteRT's signature runners, each entry point has memory of its own (the tensors its
        `GetInputs`/`GetOutputs` gave keep their data while others run) and all share the variables."""
        self._require_model()
        entries = signatures(self._model)
        if key not in entries:
            raise InputTensorError(f"the model has no signature '{key}' (signatures: {list(entries)})")
        if key == self._signature:
            return RET_OK
        self._kept[self._signature] = (self._plan, self._sized_plans)
        self._signature, self._graph = key, entries[key]
        if key in self._kept:
            plan, self._sized_plans = self._kept.pop(key)
            self._use(plan)
        else:
            self._plan_graph()
        return RET_OK

    def GetSignatures(self) -> list[str]:
        """The keys of the model's entry points, the default first (empty for a model of one graph)."""
        self._require_model()
        return list(signatures(self._model))

    def _plan_graph(self) -> None:
        """Compile `self._graph` for its stored input dims (unknown dims as 1, else deferred to the first size)."""
        model = self._model
        unknown = any(d < 0 for i in self._graph.inputs for d in model.tensors[i].dims)
        self._sized_plans = {} if unknown else None
        self._unfixed.difference_update(self._graph.inputs)
        try:
            self._compile({i: tuple(max(d, 1) if d < 0 else d for d in model.tensors[i].dims)
                           for i in self._graph.inputs})
        except LiteError:
            if not unknown:
                raise
            self._defer()       # no plan fits dims of 1: the first Resize or set_data of a size makes it

    def _defer(self) -> None:
        """No plan until the unknown input dims are fixed: the inputs are empty tensors (0 for an unknown dim)
        that Resize, or set_data of a size, fixes."""
        self._plan = None
        self._unfixed.update(i for i in self._graph.inputs if any(d < 0 for d in self._model.tensors[i].dims))
        for i in self._graph.inputs:
            t = self._model.tensors[i]
            array = np.zeros(tuple(max(d, 0) for d in t.dims), dtypes.to_numpy(t.data_type))
            self._tensors.setdefault(i, MSTensor(local_name(self._signature, t.name), t.data_type))._rebind(
                array, t.data_type)
            self._tensors[i]._fit = functools.partial(self._fit, i)

    def _fit(self, i: int, shape: tuple[int, ...]) -> bool:
        """set_data of a new size on input `i`, when it keeps the model's known dims: the tensor takes an array
        of that size, and the next RunGraph plans for the inputs' sizes (`_follow_input_sizes`)."""
        t = self._model.tensors[i]
        if len(shape) != len(t.dims) or any(0 <= d != n for d, n in zip(t.dims, shape)):
            return False
        self._tensors[i]._rebind(np.zeros(shape, dtypes.to_numpy(self._tensors[i].data_type())))
        self._unfixed.discard(i)
        return True

    def _follow_input_sizes(self) -> None:
        """Before a run of a model with unknown input dims: when set_data gave inputs data of new sizes, the plan
        for those sizes (one made before, or a new one), the data kept."""
        if self._sized_plans is None or self._unfixed.intersection(self._graph.inputs):
            return
        shapes = {i: tuple(self._tensors[i].shape()) for i in self._graph.inputs}
        if self._plan is not None and all(shapes[i] == tuple(self._plan.specs[i].shape) for i in shapes):
            return
        data = {i: self._tensors[i].MutableData() for i in self._graph.inputs}
        self.Resize([self._tensors[i] for i in self._graph.inputs], [list(shapes[i]) for i in self._graph.inputs])
        for i, array in data.items():
            np.copyto(self._tensors[i].MutableData(), array)

    def _compile(self, shapes: dict[int, tuple[int, ...]]) -> None:
        key = tuple(shapes[i] for i in self._graph.inputs)
        plan = self._sized_plans.get(key) if self._sized_plans is not None else None    # a size seen before
        if plan is None:
            start = startup_seconds()
            with selection(self.context.kernels, self.context.thread_num), float16_compute(self.float16), \
                    gc_pause.paused():
                plan = compile_graph(self._model, shapes, self._graph if self._graph is not self._model else None,
                                     self._state)
            self.jit_seconds = startup_seconds() - start
            if self._sized_plans is not None:
                self._sized_plans[key] = plan
        self._use(plan)
        for i in set(self._graph.inputs) | set(self._graph.outputs):
            t = self._model.tensors[i]
            type_id = t.data_type if plan.specs[i] is None else dtypes.from_numpy(plan.specs[i].dtype)
            if i in self._tensors:
                self._tensors[i]._rebind(plan.arrays[i], type_id)
            else:
                self._tensors[i] = MSTensor(local_name(self._signature, t.name), type_id, plan.arrays[i])
            if self._sized_plans is not None and i in self._graph.inputs:
                self._tensors[i]._fit = functools.partial(self._fit, i)

    def _use(self, plan: ExecutionPlan | None) -> None:
        """Make `plan` (of the selected graph; None: waiting for the unknown input dims) the one runs use."""
        self._plan = plan
        self._node_io = None
        if plan is not None:
            self._compiled_first = compiled_first(step.kernel for step in plan.steps)
            self._dynamic_outputs = [i for i in self._graph.outputs if plan.specs[i] is None]

    @property
    def model(self) -> Model | None:
        """The compiled model (None before `CompileGraph`)."""
        return self._model

    @property
    def graph(self) -> Model | SubGraphDef | None:
        """The graph `RunGraph` runs: the model, or a training model's `eval` part."""
        return self._graph

    def _require_compiled(self) -> ExecutionPlan:
        if self._plan is None:
            self._require_model()
            unknown = next((t for t in (self._model.tensors[i] for i in self._graph.inputs)
                            if any(d < 0 for d in t.dims)), None)
            if unknown is None:
                raise ParamInvalidError("the session has no compiled graph: call CompileGraph first")
            raise InputTensorError(f"input '{unknown.name}' has unknown dims {list(unknown.dims)}: Resize it, or "
                                   f"set data of its size, first")
        return self._plan

    def _require_model(self) -> None:
        if self._model is None:
            raise ParamInvalidError("the session has no compiled graph: call CompileGraph first")

    def _input_shapes(self) -> dict[int, tuple[int, ...]]:
        """The inputs' shapes: the plan's, or the model's dims (-1 unknown) before the first plan."""
        if self._plan is None:
            return {i: tuple(self._model.tensors[i].dims) for i in self._graph.inputs}
        return {i: tuple(self._plan.specs[i].shape) for i in self._graph.inputs}

    def _threads(self) -> thread_limit:
        """The threads of a run: `Context.thread_num` to the pool that runs most of the plan's work."""
        return thread_limit(*split(self.context.thread_num, self._compiled_first))

    @property
    def arena_bytes(self) -> int:
        """Bytes of the planned activation arena (inputs, intermediates, outputs and scratch)."""
        return self._require_compiled().arena_bytes

    # ---- inputs / outputs ----------------------------------------------------------------------------------
    def GetInputs(self) -> list[MSTensor]:
        self._require_model()
        return [self._tensors[i] for i in self._graph.inputs]

    def GetInputsByTensorName(self, name: str) -> MSTensor | None:
        return next((t for t in self.GetInputs() if t.tensor_name() == name), None)

    def GetOutputs(self) -> dict[str, MSTensor]:
        self._require_compiled()
        return {self._tensors[i].tensor_name(): self._tensors[i] for i in self._graph.outputs}

    def GetOutputTensorNames(self) -> list[str]:
        return list(self.GetOutputs())

    def GetOutputByTensorName(self, name: str) -> MSTensor | None:
        return self.GetOutputs().get(name)

    def GetOutputsByNodeName(self, node_name: str) -> list[MSTensor]:
        """Deprecated (as in MindSpore Lite 1.1): use GetOutputByTensorName."""
        warnings.warn("GetOutputsByNodeName is deprecated; use GetOutputByTensorName", DeprecationWarning,
                      stacklevel=2)
        self._require_compiled()
        outs = set(self._graph.outputs)
        node = next((n for n in self._graph.nodes if n.name == node_name), None)
        return [self._tensors[t] for t in node.outputs if t in outs] if node else []

    # ---- run -----------------------------------------------------------------------------------------------
    @exclusive
    def RunGraph(self, before: KernelCallBack | None = None, after: KernelCallBack | None = None) -> int:
        """Run every node in order. A callback returning False stops the run: the remaining nodes are skipped
        and RET_SUCCESS_EXIT is returned."""
        self._follow_input_sizes()
        plan = self._require_compiled()
        with self._threads():
            if before is None and after is None:
                self._run_plain(plan)
                if plan.dynamic is not None:
                    self._run_dynamic(plan)
                return RET_OK
            status = self._run_with_callbacks(plan, before, after)
            if status == RET_OK and plan.dynamic is not None:
                status = self._run_dynamic(plan, before, after)
            return status

    def _run_dynamic(self, plan: ExecutionPlan, before: KernelCallBack | None = None,
                     after: KernelCallBack | None = None) -> int:
        """The dynamic part, after the static steps (which never read its tensors); the graph outputs it
        computes are rebound to their new arrays."""
        wrap = self._wrap_args if before is not None or after is not None else None
        with selection(self.context.kernels, self.context.thread_num), float16_compute(self.float16):  # kernels made now
            finished = plan.dynamic.run(before, after, wrap)
        for i in self._dynamic_outputs:
            if i in plan.dynamic.arrays:
                array = plan.dynamic.arrays[i]
                self._tensors[i]._rebind(array, dtypes.from_numpy(array.dtype))
        return RET_OK if finished else RET_SUCCESS_EXIT

    def _run_plain(self, plan: ExecutionPlan) -> None:
        k = 0
        try:
            for k, run, inputs, outputs in plan.calls:
                run(inputs, outputs)
        except LiteError:
            raise
        except Exception as e:
            node = plan.steps[k].node
            raise OpExecuteError(f"{node.op} node '{node.name}' failed: {e}") from e

    def _run_with_callbacks(self, plan: ExecutionPlan, before: KernelCallBack | None,
                            after: KernelCallBack | None) -> int:
        if self._node_io is None:
            self._node_io = self._callback_io(plan)
        return self._run_plan_with_callbacks(plan, self._node_io, before, after)

    def _callback_io(self, plan: ExecutionPlan, tensors: list[TensorDef] | None = None
                     ) -> list[tuple[list[MSTensor], list[MSTensor], CallBackParam]]:
        """What the callbacks receive at each step of `plan` (built once per compile: tensors over the arrays),
        named from `tensors` (the plan's tensor table when it is not the model's)."""
        return [self._wrap_args(s.node, s.input_ids, s.inputs, s.output_ids, s.outputs, tensors) for s in plan.steps]

    def _run_plan_with_callbacks(self, plan: ExecutionPlan,
                                 node_io: list[tuple[list[MSTensor], list[MSTensor], CallBackParam]],
                                 before: KernelCallBack | None, after: KernelCallBack | None) -> int:
        for step, (ins, outs, param) in zip(plan.steps, node_io):
            if before is not None and self._callback(before, ins, outs, param) is False:
                return RET_SUCCESS_EXIT
            try:
                step.kernel.run(step.inputs, step.outputs)
            except LiteError:
                raise
            except Exception as e:
                raise OpExecuteError(f"{step.node.op} node '{step.node.name}' failed: {e}") from e
            if after is not None and self._callback(after, ins, outs, param) is False:
                return RET_SUCCESS_EXIT
        return RET_OK

    def _callback(self, callback: KernelCallBack, ins: list[MSTensor], outs: list[MSTensor],
                  param: CallBackParam) -> bool:
        self._in_callback = True
        try:
            return callback(ins, outs, param)
        finally:
            self._in_callback = False

    def _wrap_args(self, node: NodeDef, input_ids: list[int], inputs: list[np.ndarray | None],
                   output_ids: list[int], outputs: list[np.ndarray], tensors: list[TensorDef] | None = None
                   ) -> tuple[list[MSTensor], list[MSTensor], CallBackParam]:
        tensors = tensors or self._model.tensors

        def wrap(ids: list[int], arrays: list[np.ndarray | None]) -> list[MSTensor]:
            return [MSTensor(tensors[i].name, dtypes.from_numpy(a.dtype), a,
                             [(q.scale, q.zeroPoint) for q in tensors[i].quant_params] if a.dtype.kind in "iu"
                             else None)
                    for i, a in zip(ids, arrays) if i >= 0 and a is not None]

        return wrap(input_ids, inputs), wrap(output_ids, outputs), CallBackParam(node.name, node.op)

    # ---- resize / threads ------------------------------------------------------------------------------------
    @exclusive
    def Resize(self, inputs: Sequence[MSTensor], dims: Sequence[Sequence[int]]) -> int:
        """Give graph inputs new shapes and recompile (shapes, folding, memory plan). Input data is reset."""
        self._require_model()
        if len(inputs) != len(dims):
            raise ParamInvalidError(f"Resize got {len(inputs)} tensors but {len(dims)} shapes")
        by_name = {self._tensors[i].tensor_name(): i for i in self._graph.inputs}
        shapes = self._input_shapes()
        for tensor, shape in zip(inputs, dims):
            name = tensor.tensor_name() if isinstance(tensor, MSTensor) else str(tensor)
            if name not in by_name:
                raise InputTensorError(f"Resize: '{name}' is not an input of this model")
            shape = tuple(int(d) for d in shape)
            old = shapes[by_name[name]]
            if len(shape) != len(old) or any(d < 0 for d in shape):
                raise InputTensorError(f"Resize: input '{name}' has shape {list(old)}; {list(shape)} must have "
                                       f"the same rank and non-negative dims")
            shapes[by_name[name]] = shape
            self._unfixed.discard(by_name[name])
        if self._unfixed.intersection(self._graph.inputs):      # others unknown yet: a run with every size plans
            for i, shape in shapes.items():
                if i not in self._unfixed:
                    self._tensors[i]._rebind(np.zeros(shape, dtypes.to_numpy(self._tensors[i].data_type())))
            return RET_OK
        previous = self._input_shapes()
        try:
            self._compile(shapes)
        except LiteError:
            if any(d < 0 for shape in previous.values() for d in shape):
                self._defer()
            else:
                self._compile(previous)     # the session stays usable with its former shapes
            raise
        return RET_OK

    @exclusive
    def ResetVariables(self) -> int:
        """Every variable the model writes (an imported TFLite model's resource variables: a streaming model's
        state) back to its initial value, as a new session starts."""
        self._require_compiled()
        for i, array in self._state.items():
            np.copyto(array, self._model.tensors[i].data)
        return RET_OK

    def SaveToFile(self, filename: str | os.PathLike) -> int:
        """Write a checkpoint of the session (atomically): `ExportToBuf()`'s bytes."""
        write_atomic(filename, self.ExportToBuf())
        return RET_OK

    @exclusive
    def ExportToBuf(self) -> bytes:
        """The model with its variables' current values saved beside their initial ones (`lite.variables`): a
        session compiling it continues a streaming model's state where this one is; its `ResetVariables` still
        starts over."""
        self._require_model()
        return variables.model_bytes(self._model, variables.with_state(self._model.tensors, self._state))

    def BindThread(self, if_bind: bool) -> None:
        """Accepted for API compatibility: Python cannot pin its threads to cores portably."""
        self._bound = bool(if_bind)
