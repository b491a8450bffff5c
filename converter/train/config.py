r"""Training options: the `[train_param]` section of `--configFile` and the matching `converter_lite` flags.

    [train_param]
    loss = softmax_cross_entropy      ; mse | bce_with_logits | smooth_l1 (+ beta) | ctc (+ label_length, blank)
    labels = sparse                   ; softmax_cross_entropy only: sparse (int32 [N]) | onehot (float32 [N, C])
    optimizer = sgd                   ; sgd (momentum, dampening, nesterov) | momentum | adam (beta1, beta2, epsilon)
    learning_rate = 0.01
    weight_decay = 0                  ; every optimizer (Adam: decoupled, AdamW)
    trainable = fc\..*                ; comma-separated regexes, each matching whole source weight names
    freeze = features\.0\..*          ; the same; frozen wins over trainable
    freeze_until = /layer3/Add        ; a node (TFLite: its output's name): weights it or a node before it reads freeze
    output = logits                   ; the model output the loss reads (default: the first)
    label_length = 8                  ; ctc only: labels are int32 [N, label_length] rows padded with the blank
    blank = 0                         ; ctc only: the blank class (predictions are time-major [T, N, classes])

Flags spell the same keys in camelCase (`--learningRate=0.1 --freezeUntil=...`). An unknown key, a bad value or a
key that does not apply to the chosen loss/optimizer raises ParamInvalidError (status RET_PARAM_INVALID, -3)
naming the key.
"""
from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, fields

from lite.status import ParamInvalidError

SECTION = "train_param"
LOSSES = ("softmax_cross_entropy", "mse", "bce_with_logits", "smooth_l1", "ctc")
OPTIMIZERS = ("sgd", "momentum", "adam")
LABEL_KINDS = ("sparse", "onehot")     # how `labels` holds the targets of softmax_cross_entropy
_TRUE, _FALSE = ("true", "1", "on", "yes"), ("false", "0", "off", "no")

# key -> (the setting it depends on, the values of that setting it applies to)
_APPLIES = {
    "labels": ("loss", ("softmax_cross_entropy",)),
    "beta": ("loss", ("smooth_l1",)),
    "label_length": ("loss", ("ctc",)),
    "blank": ("loss", ("ctc",)),
    "momentum": ("optimizer", ("sgd", "momentum")),
    "nesterov": ("optimizer", ("sgd", "momentum")),
    "dampening": ("optimizer", ("sgd",)),
    "beta1": ("optimizer", ("adam",)),
    "beta2": ("optimizer", ("adam",)),
    "epsilon": ("optimizer", ("adam",)),
}


@dataclass
class TrainParams:
    """What `--trainModel=true` builds. `momentum=None` means the optimizer's default (sgd 0, momentum 0.9)."""
    loss: str = "softmax_cross_entropy"
    labels: str = "sparse"
    beta: float = 1.0
    optimizer: str = "sgd"
    learning_rate: float = 0.01
    momentum: float | None = None
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    trainable: tuple[str, ...] = ()
    freeze: tuple[str, ...] = ()
    freeze_until: str = ""
    output: str = ""
    label_length: int = 0
    blank: int = 0

    def __post_init__(self) -> None:
        if self.momentum is None:
            self.momentum = 0.9 if self.optimizer == "momentum" else 0.0
        self.trainable, self.freeze = tuple(self.trainable), tuple(self.freeze)
        _validate(self)


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ParamInvalidError(f"train parameter '{key}': {message}")


def _validate(p: TrainParams) -> None:
    _check(p.loss in LOSSES, "loss", f"'{p.loss}' is not one of {', '.join(LOSSES)}")
    _check(p.labels in LABEL_KINDS, "labels", f"'{p.labels}' is not one of {', '.join(LABEL_KINDS)}")
    _check(p.optimizer in OPTIMIZERS, "optimizer", f"'{p.optimizer}' is not one of {', '.join(OPTIMIZERS)}")
    _check(p.learning_rate > 0, "learning_rate", f"{p.learning_rate} must be positive")
    _check(p.beta > 0, "beta", f"{p.beta} must be positive")
    _check(p.loss != "ctc" or p.label_length > 0, "label_length", "ctc needs label_length > 0 (the labels' width)")
    _check(p.blank >= 0, "blank", f"{p.blank} must not be negative")
    _check(p.epsilon > 0, "epsilon", f"{p.epsilon} must be positive")
    _check(p.weight_decay >= 0, "weight_decay", f"{p.weight_decay} must not be negative")
    for key in ("momentum", "beta1", "beta2"):
        value = getattr(p, key)
        _check(0 <= value < 1, key, f"{value} must be in [0, 1)")
    _check(0 <= p.dampening <= 1, "dampening", f"{p.dampening} must be in [0, 1]")
    _check(not p.nesterov or (p.momentum > 0 and p.dampening == 0), "nesterov",
           "needs momentum > 0 and dampening 0")
    for key in ("trainable", "freeze"):
        for pattern in getattr(p, key):
            try:
                re.compile(pattern)
            except re.error as e:
                raise ParamInvalidError(f"train parameter '{key}': '{pattern}' is not a regex: {e}") from None


# ---- parsing ----------------------------------------------------------------------------------------------------
_TYPES = {f.name: f.type for f in fields(TrainParams)}


def _value(key: str, text: str, where: str) -> object:
    kind = _TYPES[key]
    text = text.strip()
    if kind == "bool":
        if text.lower() not in _TRUE + _FALSE:
            raise ParamInvalidError(f"{where}: '{text}' is not a boolean (true or false)")
        return text.lower() in _TRUE
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ParamInvalidError(f"{where}: '{text}' is not an integer") from None
    if kind in ("float", "float | None"):
        try:
            return float(text)
        except ValueError:
            raise ParamInvalidError(f"{where}: '{text}' is not a number") from None
    if kind == "tuple[str, ...]":
        return tuple(p.strip() for p in text.split(",") if p.strip())
    return text


def _build(items: dict[str, tuple[str, str]]) -> TrainParams:
    """TrainParams from {key: (text, where the user wrote it)}."""
    values = {}
    for key, (text, where) in items.items():
        if key not in _TYPES:
            raise ParamInvalidError(f"{where}: unknown train parameter (known: {', '.join(_TYPES)})")
        values[key] = _value(key, text, where)
    params = TrainParams(**values)
    for key, (_, where) in items.items():
        if key in _APPLIES:
            setting, allowed = _APPLIES[key]
            if getattr(params, setting) not in allowed:
                raise ParamInvalidError(f"{where}: applies to {setting} {' or '.join(allowed)}, "
                                        f"not {getattr(params, setting)}")
    return params


def _config_items(path: str | os.PathLike) -> dict[str, tuple[str, str]]:
    """The `[train_param]` entries of an INI file as {key: (text, where)} ({} when the section is absent)."""
    parser = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None)
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except OSError as e:
        raise ParamInvalidError(f"config file '{path}' cannot be read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ParamInvalidError(f"config file '{path}' is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except configparser.Error as e:
        raise ParamInvalidError(f"config file '{path}' is not a valid INI file: {e}") from None
    if not parser.has_section(SECTION):
        return {}
    return {key: (text, f"[{SECTION}] {key} in '{path}'") for key, text in parser.items(SECTION)}


def _snake(flag: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", flag.lstrip("-")).lower()


def load_train_config(path: str | os.PathLike) -> TrainParams:
    """The `[train_param]` section of an INI config file (defaults when the section is absent)."""
    return _build(_config_items(path))


def parse_train_flags(flags: dict[str, str], config_file: str | os.PathLike | None = None) -> TrainParams:
    """TrainParams from converter flags by name, e.g. {"loss": "mse", "learningRate": "0.1"} ("--" optional),
    over the `[train_param]` section of `config_file` when given."""
    items = _config_items(config_file) if config_file else {}
    items.update({_snake(flag): (text, f"--{flag.lstrip('-')}") for flag, text in flags.items()})
    return _build(items)
