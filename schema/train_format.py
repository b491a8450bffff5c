"""The training-model contract (docs/training.md), shared by the converter that writes training models and the
runtime that trains them: subgraph names, reserved tensor names and each optimizer op's input layout."""
from __future__ import annotations

# subgraphs of a training model
EVAL = "eval"                # the inference forward (inference sessions run only this part)
GRADIENTS = "gradients"      # train forward, loss, backward
OPTIMIZER = "optimizer"      # one update node per trainable weight

# reserved tensor names
LABELS = "labels"                    # graph input: the targets of the loss
LOSS = "loss"                        # scalar float32 output of the loss
LEARNING_RATE = "learning_rate"      # scalar float32 constant read by every optimizer node
GLOBAL_STEP = "global_step"          # checkpoints: int64 scalar, training steps run so far
TRAIN_SUFFIX = "/train"              # the train forward's copy of value v is named v + TRAIN_SUFFIX
GRAD_SUFFIX = "/grad"                # the gradient of weight w is the tensor w + GRAD_SUFFIX

# optimizer op -> the role of each input; "weight", "grad" and "lr" are the weight, its gradient and
# `learning_rate`, every other role names a state tensor `<weight>/<role>`
OPTIMIZER_INPUTS: dict[str, tuple[str, ...]] = {
    "Sgd": ("weight", "grad", "lr", "accum", "stat"),
    "ApplyMomentum": ("weight", "accum", "lr", "grad"),
    "Adam": ("weight", "m", "v", "step", "lr", "grad"),
}
OPTIMIZER_STATE = tuple(dict.fromkeys(r for roles in OPTIMIZER_INPUTS.values() for r in roles
                                      if r not in ("weight", "grad", "lr")))
