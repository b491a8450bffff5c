"""Helpers of the federation tests (processes and simulation): the model, random shards, node configs, and the
oracle — each client's own record of what it sent, averaged here, against the server's exported global model."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import lite
import models
from converter import convert_for_training
from converter.train import TrainParams
from lite.federated.shards import save_shard

BATCH = 16


def lenet_train_model(path: Path) -> Path:
    path.write_bytes(convert_for_training(models.build("lenet5", num_classes=10, input_size=28, batch=BATCH),
                                          TrainParams(optimizer="adam", learning_rate=1e-3)))
    return path


def shard(folder: Path, k: int, n: int) -> Path:
    rng = np.random.default_rng(k)
    return save_shard(folder / f"shard-{k}.npz", rng.normal(size=(n, 1, 28, 28)).astype(np.float32),
                      rng.integers(0, 10, n))


def node(model: Path, shard_path: Path, record_dir: Path, **extra: str) -> dict[str, str]:
    """A node config; numpy kernels, as numba's load would cost each per-message ClientApp process ~3 s of CPU."""
    return {"model": str(model), "shard": str(shard_path), "record-dir": str(record_dir), "kernels": "numpy",
            **extra}


def run_config(model: Path, out: Path, nodes: list[dict[str, str]], **extra: object) -> dict[str, object]:
    return {"model": str(model), "out-dir": str(out), "batch-size": BATCH, "min-nodes": len(nodes),
            "export-every-round": True, "kernels": "numpy", **extra}


def sent(record_dir: Path, server_round: int) -> tuple[dict[str, np.ndarray], int]:
    """The weights and `num-examples` a client recorded sending in `server_round`."""
    with np.load(record_dir / f"round-{server_round}.npz") as f:
        return {k: f[k] for k in f.files if k != "__examples__"}, int(f["__examples__"])


def exported(path: Path) -> dict[str, np.ndarray]:
    """The weights of an exported inference .ms, by name in the source layout (read with lite.Model)."""
    return {t.name: t.data.transpose(t.source_perm) if t.source_perm else t.data
            for t in lite.Model.Load(path).tensors if t.data is not None}


def weighted_mean(updates: list[tuple[dict[str, np.ndarray], int]]) -> dict[str, np.ndarray]:
    total = sum(n for _, n in updates)
    return {k: sum(w[k].astype(np.float64) * n for w, n in updates) / total for k in updates[0][0]}
