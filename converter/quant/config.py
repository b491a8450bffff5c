"""The post-training quantization config: MindSpore's INI form (r1.3+) and its older `key=value` form (r1.1).

Every problem is a `ParamInvalidError` naming the key (or folder) at fault, raised before any calibration runs.
"""
from __future__ import annotations

import configparser
import os
from dataclasses import dataclass, field

from lite.status import ParamInvalidError

POST_TRAINING, WEIGHT_QUANT, MIXED_BIT_WEIGHT_QUANT = "PostTraining", "WeightQuant", "MixedBitWeightQuant"
DYNAMIC_QUANT = "DynamicQuant"       # int8 weights, activations quantized per run (converter/quant/dynamic.py)
METHODS = ("MAX_MIN", "KL", "REMOVAL_OUTLIER", "PERCENTILE", "MSE")
FULL_BITS, WEIGHT_ONLY_BITS, MIXED_BITS = (2, 8), (1, 16), (4, 8)
WEIGHT_METHODS = ("MAX_MIN", "MSE", "PERCENTILE")
AUTO, MINDSPORE_LITE = "AUTO", "MINDSPORE_LITE"
PRESETS = (AUTO, MINDSPORE_LITE)
# The method keys and what each preset gives a key the config leaves out (converter/quant/auto.py): AUTO's
# activation ranges (None) are KL's or MAX_MIN's, whichever the calibration outputs prefer, and its AdaRound
# (None) is decided by the time budget.
METHOD_KEYS = {"activation_quant_method": "method", "weight_quant_method": "weight_method",
               "bias_correction": "bias_correction", "cross_layer_equalization": "cross_layer_equalization",
               "adaround": "adaround"}
PRESET_METHODS = {
    MINDSPORE_LITE: {"method": "MAX_MIN", "weight_method": "MAX_MIN", "bias_correction": False,
                     "cross_layer_equalization": False, "adaround": False},
    AUTO: {"method": None, "weight_method": "MAX_MIN", "bias_correction": True, "cross_layer_equalization": True,
           "adaround": None},
}
_OLD_METHODS = {"MAX_MIN": "MAX_MIN", "KL": "KL", "REMOVALOUTLIER": "REMOVAL_OUTLIER",
                "REMOVAL_OUTLIER": "REMOVAL_OUTLIER", "PERCENTILE": "PERCENTILE", "MSE": "MSE"}


@dataclass
class QuantConfig:
    """Everything the quantizer needs. `calibrate_path` maps graph input names to folders ("" = the only input)."""
    quant_type: str = POST_TRAINING
    activation_bits: int = 8
    weight_bits: int = 8
    min_quant_weight_size: int = 0       # weights with at most this many elements stay float
    min_quant_weight_channel: int = 16   # weights with at most this many output channels stay float
    calibrate_path: dict[str, str] = field(default_factory=dict)
    calibrate_size: int = 100
    input_type: str = "BIN"
    normalize_mean: list[float] = field(default_factory=list)
    normalize_std: list[float] = field(default_factory=list)
    resize_width: int = 0
    resize_height: int = 0
    # The method keys: None = not given, filled by the preset (`converter.quant.auto.resolve`).
    method: str | None = None           # activation ranges: METHODS
    bias_correction: bool | None = None
    weight_method: str | None = None    # per-channel weight scales: MAX_MIN | MSE | PERCENTILE
    cross_layer_equalization: bool | None = None
    adaround: bool | None = None
    preset: str | None = None           # AUTO | MINDSPORE_LITE; None: AUTO unless a method key is given
    time_budget: float = 60.0           # AUTO: seconds the quantization may take on the calibration set
    adaround_iterations: int = 100
    min_output_sqnr: float = 0.0        # > 0: automatic mixed precision with this output SQNR budget (dB)
    init_scale: float = 0.02            # MixedBitWeightQuant: the relative weight error each layer may reach
    debug_info_save_path: str = ""      # non-empty: write the per-layer debug report there (JSON)
    input_data_type: str = "FLOAT"      # FLOAT | INT8 | UINT8: graph inputs of a fully quantized model
    output_data_type: str = "FLOAT"

    def validate(self) -> "QuantConfig":
        """Check ranges and folders; returns self."""
        types = (POST_TRAINING, WEIGHT_QUANT, MIXED_BIT_WEIGHT_QUANT, DYNAMIC_QUANT)
        if self.quant_type not in types:
            raise ParamInvalidError(f"quant_type must be one of {', '.join(types)}, got '{self.quant_type}'")
        lo, hi = FULL_BITS if self.quant_type in (POST_TRAINING, DYNAMIC_QUANT) else WEIGHT_ONLY_BITS
        bits = {"weight_bit_num": self.weight_bits}
        if self.quant_type == POST_TRAINING:
            bits["activation_bit_num"] = self.activation_bits
        if self.quant_type != MIXED_BIT_WEIGHT_QUANT:
            for key, value in bits.items():
                if not lo <= value <= hi:
                    raise ParamInvalidError(f"{key} = {value} is out of range: {self.quant_type} takes "
                                            f"{lo}..{hi} bits")
        for key, value, allowed in (("activation_quant_method", self.method, METHODS),
                                    ("weight_quant_method", self.weight_method, WEIGHT_METHODS),
                                    ("preset", self.preset, PRESETS)):
            if value is not None and value not in allowed:
                raise ParamInvalidError(f"{key} must be one of {', '.join(allowed)}, got '{value}'")
        if self.adaround_iterations < 1:
            raise ParamInvalidError(f"adaround_iterations must be positive, got {self.adaround_iterations}")
        if not self.time_budget > 0:
            raise ParamInvalidError(f"time_budget must be a positive number of seconds, got {self.time_budget}")
        if self.min_output_sqnr < 0:
            raise ParamInvalidError(f"min_output_sqnr must be >= 0 dB, got {self.min_output_sqnr}")
        if not 0 < self.init_scale < 1:
            raise ParamInvalidError(f"init_scale must be in (0, 1), got {self.init_scale}")
        if self.input_type not in ("BIN", "IMAGE"):
            raise ParamInvalidError(f"input_type must be BIN or IMAGE, got '{self.input_type}'")
        for key in ("input_data_type", "output_data_type"):
            if getattr(self, key) not in ("FLOAT", "INT8", "UINT8"):
                raise ParamInvalidError(f"{key} must be FLOAT, INT8 or UINT8, got '{getattr(self, key)}'")
        if self.calibrate_size < 1:
            raise ParamInvalidError(f"calibrate_size must be positive, got {self.calibrate_size}")
        for name, folder in self.calibrate_path.items():
            if not os.path.isdir(folder):
                raise ParamInvalidError(f"calibrate_path: calibration folder '{folder}' "
                                        f"{'of input ' + repr(name) + ' ' if name else ''}does not exist")
        return self


def _int(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ParamInvalidError(f"{key} must be an integer, got '{text}'") from None


def _float(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ParamInvalidError(f"{key} must be a number, got '{text}'") from None


def _bool(key: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ParamInvalidError(f"{key} must be true or false, got '{text}'")
    return text.lower() == "true"


def _floats(key: str, text: str) -> list[float]:
    try:
        return [float(v) for v in text.strip("[]").replace(";", ",").split(",") if v.strip()]
    except ValueError:
        raise ParamInvalidError(f"{key} must be a list of numbers, got '{text}'") from None


def _paths(key: str, text: str, base: str) -> dict[str, str]:
    """`input:dir[,input2:dir2]` (or a bare `dir` for a single input); relative dirs are relative to `base`."""
    paths = {}
    for item in (p.strip() for p in text.replace(";", ",").split(",") if p.strip()):
        name, sep, folder = item.partition(":")
        if not sep or os.path.isdir(os.path.join(base, item)):
            name, folder = "", item
        paths[name] = os.path.join(base, folder)
    if not paths:
        raise ParamInvalidError(f"{key} is empty")
    return paths


def _apply(cfg: QuantConfig, key: str, value: str, base: str) -> None:
    """Set one key (either form) on `cfg`."""
    value = value.strip()
    if key == "quant_type":
        cfg.quant_type = {"FULL_QUANT": POST_TRAINING, "WEIGHT_QUANT": WEIGHT_QUANT,
                          "MIXED_BIT_WEIGHT_QUANT": MIXED_BIT_WEIGHT_QUANT,
                          "DYNAMIC_QUANT": DYNAMIC_QUANT}.get(value.upper(), value)
    elif key == "bit_num":
        cfg.activation_bits = cfg.weight_bits = _int(key, value)
    elif key == "activation_bit_num":
        cfg.activation_bits = _int(key, value)
    elif key == "weight_bit_num":
        cfg.weight_bits = _int(key, value)
    elif key in ("min_quant_weight_size", "min_quant_weight_channel", "calibrate_size", "resize_width",
                 "resize_height"):
        setattr(cfg, key, _int(key, value))
    elif key == "batch_count":
        cfg.calibrate_size = _int(key, value)
    elif key in ("calibrate_path", "image_path"):
        cfg.calibrate_path = _paths(key, value, base)
    elif key == "input_type":
        cfg.input_type = value.upper()
    elif key in ("normalize_mean", "normalize_std"):
        setattr(cfg, key, _floats(key, value))
    elif key in ("activation_quant_method", "method_x"):
        cfg.method = _OLD_METHODS.get(value.upper(), value)
    elif key in ("bias_correction", "cross_layer_equalization", "adaround"):
        setattr(cfg, key, _bool(key, value))
    elif key in ("weight_quant_method", "preset"):
        setattr(cfg, "weight_method" if key == "weight_quant_method" else key, value.upper())
    elif key == "adaround_iterations":
        cfg.adaround_iterations = _int(key, value)
    elif key in ("min_output_sqnr", "init_scale", "time_budget"):
        setattr(cfg, key, _float(key, value))
    elif key == "debug_info_save_path":
        cfg.debug_info_save_path = os.path.join(base, value) if value else ""
    elif key == "thread_num":
        _int(key, value)            # accepted for compatibility; the runtime's thread count is used
    else:
        raise ParamInvalidError(f"unknown config key '{key}'")


SECTIONS = {
    "common_quant_param": ("quant_type", "bit_num", "activation_bit_num", "weight_bit_num", "min_quant_weight_size",
                           "min_quant_weight_channel", "debug_info_save_path"),
    "data_preprocess_param": ("calibrate_path", "calibrate_size", "input_type", "normalize_mean", "normalize_std",
                              "resize_width", "resize_height"),
    "full_quant_param": ("preset", "time_budget", "activation_quant_method", "bias_correction",
                         "weight_quant_method", "cross_layer_equalization", "adaround", "adaround_iterations",
                         "min_output_sqnr"),
    "mixed_bit_weight_quant_param": ("init_scale",),
}
OLD_KEYS = ("image_path", "batch_count", "method_x", "bias_correction", "thread_num")


def parse_config(text: str, base: str = ".", defaults: QuantConfig | None = None) -> QuantConfig:
    """Parse either form; relative folders are taken relative to `base` (the config file's folder)."""
    cfg = defaults or QuantConfig()
    if any(line.strip().startswith("[") for line in text.splitlines()):
        parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
        parser.optionxform = str                       # keys are case-sensitive, as in MindSpore
        try:
            parser.read_string(text)
        except configparser.Error as e:
            raise ParamInvalidError(f"config is not valid INI: {e}") from None
        for section in parser.sections():
            if section not in SECTIONS:
                raise ParamInvalidError(f"unknown config section '[{section}]'")
            for key, value in parser[section].items():
                if key not in SECTIONS[section]:
                    raise ParamInvalidError(f"unknown config key '{key}' in [{section}]")
                _apply(cfg, key, value, base)
    else:
        for number, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ParamInvalidError(f"config line {number} is not key=value: '{line}'")
            if key.strip() not in OLD_KEYS:
                raise ParamInvalidError(f"unknown config key '{key.strip()}'")
            _apply(cfg, key.strip(), value, base)
    return cfg


def load_config(path: str | os.PathLike, defaults: QuantConfig | None = None) -> QuantConfig:
    """Read and parse a config file (not yet validated: flags may still override it)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ParamInvalidError(f"cannot read config file '{path}': {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ParamInvalidError(f"config file '{path}' is not UTF-8 text: {e.reason} at byte {e.start}") from None
    return parse_config(text, os.path.dirname(os.path.abspath(path)), defaults)
