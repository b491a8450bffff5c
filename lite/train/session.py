"""`TrainSession`: run a training model (docs/training.md) — a training step, evaluation, checkpoints, exports.

A training `.ms` holds three subgraphs over one tensor table: `eval` (inference forward), `gradients` (train
forward, loss, backward) and `optimizer` (one update node per trainable weight). The session compiles one
`ExecutionPlan` per subgraph. Everything the plans write in place is a session-owned array passed to every plan
as `external`: the *variables* (trainable weights, optimizer state, BatchNorm running statistics and
`learning_rate`, copied out of the read-only file), the `<w>/grad` arrays (written by `gradients`, read by
`optimizer`) and the graph inputs (so the data set in `Eval()` mode is the data `Train()` mode sees).

`eval` runs as the model `Export(MT_INFERENCE)` writes (`lite.train.export.inference_piece`): the weights' current
values as constants, BatchNorm folded. Kernels take other algorithms for constant weights than for variables
(packed GEMMs, Winograd), and a trained network can amplify those rounding differences (3.6e-5 of the logits'
range on PP-OCRv4's recognizer after ten steps); this way Eval computes what the exported model will, and at
its speed. That plan is made again when a weight it read has changed.

Train mode `RunGraph()` is one step: `gradients`, a check that the loss is finite (else `NonFiniteLossError`
and no update), then `optimizer` — or, under `SetupVirtualBatch(m)`, the gradients are summed and the optimizer
runs on their mean every m-th step. Dropout masks come from `PCG64([DROPOUT_SEED, k, step])` for the k-th
Dropout node at global step `step`; the step is stored in checkpoints, so save -> load -> continue reproduces
uninterrupted training exactly.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Iterable, Sequence

import numpy as np

from lite import dtypes, variables
from lite.compiler import ExecutionPlan, check_memory, compile_graph
from lite.context import Context
from lite.kernel import selection
from lite.model import Model, SubGraphDef, TensorDef
from lite.atomic_file import write_atomic
from lite.session import KernelCallBack, LiteSession, exclusive
from lite.status import RET_OK, GraphFileError, InputTensorError, NotSupportedError, OpExecuteError, ParamInvalidError
from lite.tensor import MSTensor
from lite.threads import compiled_first
from lite.train.checkpoint import checkpoint_bytes, stored_step
from lite.train.export import Piece, inference_bytes, inference_piece
from lite.train.layout import TrainLayout, draws_random, find_layout, updated_state
from schema.train_format import EVAL, GRADIENTS, LABELS, LOSS, OPTIMIZER

MT_TRAIN = 0        # MindSpore's lite::ModelType: the whole training model (a checkpoint)
MT_INFERENCE = 1    # only the forward, BatchNorm folded

DROPOUT_SEED = 0

NamedArrays = Iterable["MSTensor | tuple[str, Any]"]


class NonFiniteLossError(OpExecuteError):
    """The loss of a training step is NaN or infinite (RET_OP_EXECUTE_FAILURE): the step changed nothing — no
    weight update, BatchNorm running statistics restored, the step not counted."""


def load_model(source: Any, size: int | None = None) -> Model:
    """A model from a path, or from a buffer (`size` bytes of it)."""
    if isinstance(source, (str, os.PathLike)):
        return Model.Load(source)
    return Model.Import(source, size)


def _source_view(array: np.ndarray, perm: tuple[int, ...]) -> np.ndarray:
    """`array` seen in the source model's layout (a view: writes go to `array`)."""
    return array.transpose(perm) if perm else array


class TrainSession(LiteSession):
    """A `LiteSession` over a training model; see the module docstring. Create with `CreateSession`."""

    def __init__(self, context: Context | None = None):
        super().__init__(context)
        self._train = False
        self._layout = TrainLayout([], {}, [], {}, [], None)
        self._parts: dict[str, SubGraphDef] = {}
        self._views: dict[str, SubGraphDef] = {}
        self._plans: dict[str, ExecutionPlan] = {}
        self._variables: dict[int, np.ndarray] = {}
        self._grads: dict[int, np.ndarray] = {}
        self._grad_sums: dict[int, np.ndarray] = {}
        self._saved_stats: dict[int, np.ndarray] = {}
        self._inputs: dict[int, np.ndarray] = {}
        self._plan_io: dict[str, Any] = {}     # subgraph -> what its callbacks receive, built on first use
        self._frozen: dict[int, np.ndarray] = {}    # the variables `eval`'s plan read, as it read them
        self._eval_tensors: list[TensorDef] = []    # `eval`'s tensor table (with biases BatchNorm folding made)
        self._dropouts: list[Any] = []
        self._step = 0
        self._multiplier = 1
        self._pending = 0

    @staticmethod
    def CreateSession(*args: Any, train_mode: bool = False) -> "TrainSession":
        """`CreateSession(model_buf, size, context[, train_mode])`, `CreateSession(filename, context[,
        train_mode])` or `CreateSession(context)` (then `CompileGraph`)."""
        if len(args) <= 1:
            return TrainSession(args[0] if args else None)
        if isinstance(args[0], (str, os.PathLike)):
            if len(args) > 3:
                raise ParamInvalidError("CreateSession takes (filename, context[, train_mode])")
            model, rest = load_model(args[0]), args[1:]
        else:
            if len(args) not in (3, 4):
                raise ParamInvalidError("CreateSession takes (model_buf, size, context[, train_mode])")
            model, rest = load_model(args[0], args[1]), args[2:]
        session = TrainSession(rest[0])
        session.CompileGraph(model)
        if (rest[1] if len(rest) > 1 else train_mode):
            session.Train()
        return session

    # ---- compile ------------------------------------------------------------------------------------------
    @exclusive
    def CompileGraph(self, model: Model) -> int:
        """Set up the variables and compile every subgraph; the session starts in eval mode."""
        if not isinstance(model, Model):
            raise ParamInvalidError(f"CompileGraph needs a lite.Model, got {type(model).__name__}")
        layout = find_layout(model)
        ev = model.subgraphs.get(EVAL) or SubGraphDef(EVAL, model.inputs, model.outputs, model.nodes)
        parts = {EVAL: ev}
        views = {EVAL: ev}
        if GRADIENTS in model.subgraphs and OPTIMIZER in model.subgraphs:
            gr = model.subgraphs[GRADIENTS]
            parts[GRADIENTS] = gr
            parts[OPTIMIZER] = model.subgraphs[OPTIMIZER]
            grad_ids = set(layout.grads.values())
            views[GRADIENTS] = SubGraphDef("train", gr.inputs, [t for t in gr.outputs if t not in grad_ids],
                                           gr.nodes)
        self._model, self._layout, self._train = model, layout, False
        self._parts = {name: SubGraphDef(name, [], sg.outputs, sg.nodes) for name, sg in parts.items()}
        self._views = views
        self._variables = {t: np.array(model.tensors[t].data) for t in layout.variables}
        self._state = variables.start_values(model, variables.written(model, parts.values()))   # ResetVariables
        self._grads = {g: np.zeros_like(self._variables[w]) for w, g in layout.grads.items()}
        self._saved_stats = {t: np.empty_like(self._variables[t]) for t in layout.stats}
        self._grad_sums, self._multiplier, self._pending = {}, 1, 0
        self._step = stored_step(model)
        self._inputs, self._tensors, self._plans = {}, {}, {}
        self._graph = views[EVAL]
        inputs = dict.fromkeys([*ev.inputs, *(views[GRADIENTS].inputs if GRADIENTS in views else [])])
        self._compile({i: self._initial_shape(i, ev.inputs[0] if ev.inputs else None) for i in inputs})
        return RET_OK

    def _initial_shape(self, i: int, first_input: int | None) -> tuple[int, ...]:
        """The stored shape of input `i`, unknown dims as 1 — except an unknown labels batch, which follows
        the first input's batch."""
        dims = self._model.tensors[i].dims
        if self._model.tensors[i].name == LABELS and dims and dims[0] < 0 and first_input is not None:
            dims = (max(self._model.tensors[first_input].dims[0], 1),) + dims[1:]
        return tuple(max(d, 1) if d < 0 else d for d in dims)

    def _compile(self, shapes: dict[int, tuple[int, ...]]) -> None:
        """(Re)compile every plan with inputs of the given shapes (others keep theirs). `labels` follows a
        change of the first input's batch unless it is given a new shape itself."""
        current = {i: a.shape for i, a in self._inputs.items()}
        new = {**current, **{i: tuple(s) for i, s in shapes.items()}}
        labels = self._labels_id()
        data = self._views[EVAL].inputs[0] if self._views[EVAL].inputs else None
        if (labels is not None and data is not None and current and new[labels] == current[labels]
                and new[data][:1] != current[data][:1] and new[labels]):
            new[labels] = new[data][:1] + new[labels][1:]
        types = {i: dtypes.to_numpy(self._model.tensors[i].data_type) for i in new}
        check_memory(sum(int(np.prod(s, dtype=np.int64)) * types[i].itemsize for i, s in new.items()),
                     "the training inputs")
        inputs = {i: self._inputs[i] if current.get(i) == s else np.zeros(s, types[i]) for i, s in new.items()}
        grad_in = self._grad_sums or self._grads
        with selection(self.context.kernels, self.context.thread_num):
            plans = {name: compile_graph(self._model, {}, part, {**self._variables, **self._state, **inputs,
                                                                **(grad_in if name == OPTIMIZER else self._grads)})
                     if name != EVAL else self._inference_forward(inputs) for name, part in self._parts.items()}
        dynamic = next((p.dynamic.nodes[0] for p in plans.values() if p.dynamic is not None), None)
        if dynamic is not None:
            raise NotSupportedError(f"{dynamic.op} node '{dynamic.name}': training needs shapes known before "
                                    f"running")
        self._inputs, self._plans, self._plan_io = inputs, plans, {}
        self._compiled_first = compiled_first(s.kernel for p in plans.values() for s in p.steps)
        self._dropouts = [s.kernel for s in plans[GRADIENTS].steps
                          if draws_random(s.node)] if GRADIENTS in plans else []
        for i, array in inputs.items():
            self._bind_tensor(i, array)
        for name, view in self._views.items():
            for t in view.outputs:
                if plans[name].arrays[t] is None:
                    raise GraphFileError(f"output '{self._model.tensors[t].name}' of the {name} graph has no value: "
                                         f"nothing computes it")
                self._bind_tensor(t, plans[name].arrays[t])
        self._plan = plans[GRADIENTS if self._train else EVAL]

    def _inference_forward(self, inputs: dict[int, np.ndarray]) -> ExecutionPlan:
        """`eval`'s plan: `inference_piece` of the current weights (copied into `_frozen`) over `inputs`."""
        ev = self._views[EVAL]
        self._frozen = {t: np.array(self._variables[t])
                        for t in {i for node in ev.nodes for i in node.inputs} & self._variables.keys()}
        tensors = [replace(t, data=self._frozen[t.index]) if t.index in self._frozen else t
                   for t in self._model.tensors]
        piece = inference_piece([Piece(self._model.name, tensors, ev.nodes, ev.inputs, ev.outputs)])
        self._eval_tensors = piece.tensors
        model = Model(piece.name, self._model.version, piece.tensors, piece.nodes, piece.inputs, piece.outputs)
        return compile_graph(model, {}, SubGraphDef(EVAL, [], piece.outputs, piece.nodes), {**self._state, **inputs})

    def _refresh_forward(self) -> None:
        """`eval`'s plan made again when a weight it read has changed (a training step, ApplyGradients, a write
        through GetFeatureMaps)."""
        if all(np.array_equal(self._variables[t], value) for t, value in self._frozen.items()):
            return
        with selection(self.context.kernels, self.context.thread_num):
            self._plans[EVAL] = self._inference_forward(self._inputs)
        self._plan_io.pop(EVAL, None)
        self._compiled_first = compiled_first(s.kernel for p in self._plans.values() for s in p.steps)
        for t in self._views[EVAL].outputs:
            self._bind_tensor(t, self._plans[EVAL].arrays[t])
        self._set_mode(self._train)

    def _bind_tensor(self, i: int, array: np.ndarray) -> None:
        if i in self._tensors:
            self._tensors[i]._rebind(array)
        else:
            self._tensors[i] = MSTensor(self._model.tensors[i].name, dtypes.from_numpy(array.dtype), array)

    def _labels_id(self) -> int | None:
        view = self._views.get(GRADIENTS)
        return next((i for i in view.inputs if self._model.tensors[i].name == LABELS), None) if view else None

    def _require_training(self, call: str) -> None:
        self._require_compiled()
        if GRADIENTS not in self._plans:
            raise NotSupportedError(f"{call}: model '{self._model.name}' is an inference model — it has no "
                                    f"'{GRADIENTS}' and '{OPTIMIZER}' subgraphs (convert it with "
                                    f"--trainModel=true)")

    # ---- modes ---------------------------------------------------------------------------------------------
    @exclusive
    def Train(self) -> int:
        """Train mode: `RunGraph` runs a training step; inputs are the model's inputs then `labels`."""
        self._require_training("Train")
        self._set_mode(True)
        return RET_OK

    @exclusive
    def Eval(self) -> int:
        """Eval mode: `RunGraph` runs the inference forward (BatchNorm on running statistics, no Dropout)."""
        self._require_compiled()
        self._set_mode(False)
        self._refresh_forward()
        return RET_OK

    def _set_mode(self, train: bool) -> None:
        self._train = train
        self._graph = self._views[GRADIENTS if train else EVAL]
        self._plan = self._plans[GRADIENTS if train else EVAL]

    def IsTrain(self) -> bool:
        return self._train

    def IsEval(self) -> bool:
        return not self._train

    # ---- run -----------------------------------------------------------------------------------------------
    @exclusive
    def RunGraph(self, before: KernelCallBack | None = None, after: KernelCallBack | None = None) -> int:
        """Eval mode: one forward. Train mode: one training step (a callback returning False stops it before
        any weight update and returns RET_SUCCESS_EXIT)."""
        self._require_compiled()
        with self._threads():
            if not self._train:
                self._refresh_forward()
                return self._execute(EVAL, before, after)
            for k, kernel in enumerate(self._dropouts):
                kernel.rng = np.random.Generator(np.random.PCG64([DROPOUT_SEED, k, self._step]))
            for t, saved in self._saved_stats.items():
                np.copyto(saved, self._variables[t])
            status = self._execute(GRADIENTS, before, after)
            if status != RET_OK:
                return status
            self._check_loss()
            self._step += 1
            return self._update(before, after)

    def _execute(self, name: str, before: KernelCallBack | None, after: KernelCallBack | None) -> int:
        plan = self._plans[name]
        if before is None and after is None:
            self._run_plain(plan)
            return RET_OK
        if name not in self._plan_io:
            self._plan_io[name] = self._callback_io(plan, self._eval_tensors if name == EVAL else None)
        return self._run_plan_with_callbacks(plan, self._plan_io[name], before, after)

    def _check_loss(self) -> None:
        """Raise NonFiniteLossError for a NaN/Inf loss, with the BatchNorm statistics put back as before the step."""
        loss = self._plans[GRADIENTS].arrays[self._loss_id()]
        if not np.isfinite(loss).all():
            for t, saved in self._saved_stats.items():
                np.copyto(self._variables[t], saved)
            raise NonFiniteLossError(f"the loss of training step {self._step + 1} is {float(loss.sum())}: nothing "
                                     f"was updated (lower the learning rate or check the inputs)")

    def _loss_id(self) -> int:
        outputs = self._views[GRADIENTS].outputs
        return next((t for t in outputs if self._model.tensors[t].name == LOSS), outputs[0])

    def _update(self, before: KernelCallBack | None, after: KernelCallBack | None) -> int:
        """Run the optimizer on this step's gradients, or add them to the virtual batch."""
        if self._multiplier > 1:
            for g, total in self._grad_sums.items():
                total += self._grads[g]
            self._pending += 1
            if self._pending < self._multiplier:
                return RET_OK
            for total in self._grad_sums.values():
                total *= np.float32(1.0 / self._multiplier)
        status = self._execute(OPTIMIZER, before, after)
        self._reset_virtual_batch()
        return status

    def _reset_virtual_batch(self) -> None:
        for total in self._grad_sums.values():
            total.fill(0)
        self._pending = 0

    def GetPredictions(self) -> list[MSTensor]:
        """The prediction outputs of the current mode (the train forward's in train mode)."""
        self._require_compiled()
        loss = self._loss_id() if self._train else -1
        return [self._tensors[t] for t in self._graph.outputs if t != loss]

    # ---- learning rate, virtual batch ----------------------------------------------------------------------
    @exclusive
    def SetLearningRate(self, learning_rate: float) -> int:
        self._require_training("SetLearningRate")
        lr = float(learning_rate)
        if not np.isfinite(lr) or lr < 0:
            raise ParamInvalidError(f"SetLearningRate: the learning rate must be finite and >= 0, got {lr}")
        self._variables[self._layout.learning_rate][...] = lr
        return RET_OK

    def GetLearningRate(self) -> float:
        self._require_training("GetLearningRate")
        return float(self._variables[self._layout.learning_rate].item())

    @exclusive
    def SetupVirtualBatch(self, virtual_batch_multiplier: int, lr: float = -1, momentum: float = -1) -> int:
        """Accumulate gradients over `virtual_batch_multiplier` steps and update once with their mean (<= 1:
        update every step). `lr` > 0 sets the learning rate; `momentum` > 0 the train-mode BatchNorm momentum
        (the weight of the running statistics). A partly accumulated batch is dropped."""
        self._require_training("SetupVirtualBatch")
        multiplier = max(int(virtual_batch_multiplier), 1)
        if lr > 0:
            self.SetLearningRate(lr)
        if momentum > 0:
            if momentum >= 1:
                raise ParamInvalidError(f"SetupVirtualBatch: BatchNorm momentum must be in (0, 1), got {momentum}")
            for node in self._parts[GRADIENTS].nodes:
                if updated_state(node):
                    node.attrs.momentum = float(momentum)
        self._multiplier = multiplier
        self._grad_sums = {g: np.zeros_like(a) for g, a in self._grads.items()} if multiplier > 1 else {}
        self._pending = 0
        self._compile({})
        return RET_OK

    # ---- weights, gradients, optimizer state (in the source model's layout) --------------------------------
    def _perm(self, t: int) -> tuple[int, ...]:
        """The source layout permutation of variable `t`: its own, else (optimizer state) its weight's."""
        tensors = self._model.tensors
        weight = self._layout.owner.get(t, t)
        return tensors[t].source_perm or (tensors[weight].source_perm if tensors[t].dims == tensors[weight].dims
                                          else ())

    def _source_tensor(self, t: int, array: np.ndarray) -> MSTensor:
        """Variable `t`'s name over `array` (its value or its gradient) seen in the source layout."""
        view = _source_view(array, self._perm(t))
        return MSTensor(self._model.tensors[t].name, dtypes.from_numpy(view.dtype), view)

    def _assign(self, call: str, targets: dict[int, np.ndarray], items: NamedArrays,
                complete: bool = False) -> None:
        """Copy named values (MSTensor or (name, array), source layout) into `targets`; with `complete`, every
        target must be given. Names are checked before anything is copied."""
        by_name = {self._model.tensors[t].name: t for t in targets}
        pairs = [(item.tensor_name(), item.MutableData()) if isinstance(item, MSTensor) else item for item in items]
        unknown = [name for name, _ in pairs if name not in by_name]
        if unknown:
            raise InputTensorError(f"{call}: '{unknown[0]}' is not one of the {len(by_name)} tensors it sets "
                                   f"({', '.join(sorted(by_name))})")
        missing = sorted(set(by_name) - {name for name, _ in pairs})
        if complete and missing:
            raise InputTensorError(f"{call}: no value given for {', '.join(missing)}")
        for name, value in pairs:
            self._source_tensor(by_name[name], targets[by_name[name]]).set_data(value)

    def GetFeatureMaps(self) -> list[MSTensor]:
        """The trainable weights (live views), under the source model's names and in its layout."""
        self._require_training("GetFeatureMaps")
        return [self._source_tensor(w, self._variables[w]) for w in self._layout.weights]

    @exclusive
    def UpdateFeatureMaps(self, feature_maps: NamedArrays) -> int:
        """Set trainable weights from MSTensors or (name, array) pairs in the source layout."""
        self._require_training("UpdateFeatureMaps")
        self._assign("UpdateFeatureMaps", {w: self._variables[w] for w in self._layout.weights}, feature_maps)
        return RET_OK

    def GetGradients(self) -> list[MSTensor]:
        """The gradients of the last training step, named and laid out like `GetFeatureMaps`."""
        self._require_training("GetGradients")
        return [self._source_tensor(w, self._grads[g]) for w, g in self._layout.grads.items()]

    def ApplyGradients(self, gradients: NamedArrays) -> int:
        """Run the optimizer with the given gradients (one per trainable weight, named by weight, source
        layout). Drops a partly accumulated virtual batch."""
        self._require_training("ApplyGradients")
        inputs = self._grad_sums or self._grads
        self._assign("ApplyGradients", {w: inputs[g] for w, g in self._layout.grads.items()}, gradients, True)
        with self._threads():
            self._execute(OPTIMIZER, None, None)
        self._reset_virtual_batch()
        return RET_OK

    def GetOptimizerParams(self) -> list[MSTensor]:
        """`learning_rate` and every optimizer state tensor (live views, state in the source layout)."""
        self._require_training("GetOptimizerParams")
        ids = [self._layout.learning_rate, *self._layout.state]
        return [self._source_tensor(t, self._variables[t]) for t in ids]

    def SetOptimizerParams(self, params: NamedArrays) -> int:
        """Set the learning rate or optimizer state from MSTensors or (name, array) pairs."""
        self._require_training("SetOptimizerParams")
        ids = [self._layout.learning_rate, *self._layout.state]
        self._assign("SetOptimizerParams", {t: self._variables[t] for t in ids}, params)
        return RET_OK

    # ---- saving --------------------------------------------------------------------------------------------
    def SaveToFile(self, filename: str | os.PathLike) -> int:
        """Write a resumable training checkpoint (atomically): `Export(filename, MT_TRAIN)`."""
        return self.Export(filename, MT_TRAIN)

    def Export(self, filename: str | os.PathLike, model_type: int = MT_TRAIN) -> int:
        """MT_TRAIN: the training model with the current variables and step. MT_INFERENCE: the `eval` forward
        only, current weights, BatchNorm folded into the Conv2D/FullConnection before it — a model for a
        plain `LiteSession`. Written atomically."""
        write_atomic(filename, self.ExportToBuf(model_type))
        return RET_OK

    @exclusive
    def ExportToBuf(self, model_type: int = MT_TRAIN) -> bytes:
        self._require_compiled()
        if model_type == MT_TRAIN:
            self._require_training("Export(MT_TRAIN)")
            return self._checkpoint_bytes()
        if model_type == MT_INFERENCE:
            return inference_bytes([self._piece()])
        raise ParamInvalidError(f"Export: model_type must be MT_TRAIN ({MT_TRAIN}) or MT_INFERENCE "
                                f"({MT_INFERENCE}), got {model_type}")

    def _current_tensors(self) -> list[TensorDef]:
        return [replace(t, data=self._variables[t.index]) if t.index in self._variables else t
                for t in self._model.tensors]

    def _piece(self) -> Piece:
        """The eval forward with the current variables."""
        ev = self._views[EVAL]
        return Piece(self._model.name, self._current_tensors(), ev.nodes, ev.inputs, ev.outputs)

    def _checkpoint_bytes(self) -> bytes:
        return checkpoint_bytes(self._model, variables.with_state(self._current_tensors(), self._state), self._step)


def named(tensors: Sequence[MSTensor]) -> dict[str, np.ndarray]:
    """{name: copy of the data} of a tensor list (GetFeatureMaps, GetGradients, ...)."""
    return {t.tensor_name(): t.numpy() for t in tensors}
