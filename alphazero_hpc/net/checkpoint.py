"""Checkpoints: weights plus the model config, so a load rebuilds the same architecture.

Written atomically (temporary file, fsync, rename) and always loaded with ``weights_only=True``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from pathlib import Path
from typing import Any

import torch

from ..store import atomic
from ..config import ModelConfig
from ..errors import CheckpointError
from .model import AlphaZeroNet, build_model

CHECKPOINT_SCHEMA = 1


def save_checkpoint(path: Path, model: AlphaZeroNet, generation: int, extra: dict[str, Any] | None = None) -> None:
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    payload = {
        "schema": CHECKPOINT_SCHEMA,
        "generation": generation,
        "model_config": dataclasses.asdict(model.cfg),
        "state_dict": state,
        **(extra or {}),
    }
    # Serialise in memory, then write plainly: torch.save reports a full disk as a bare RuntimeError.
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic.write_bytes(path, buffer.getbuffer(), doing="writing checkpoint")


def read_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint dict (weights_only) or raise a one-line CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} not found: train the previous generation first (azhpc train) or check the run folder and --generation")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for truncated or foreign files
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not an azhpc checkpoint ({type(exc).__name__}): delete it and rerun the stage that writes it"
        ) from exc
    if not isinstance(payload, dict) or payload.get("schema") != CHECKPOINT_SCHEMA or "state_dict" not in payload:
        raise CheckpointError(f"checkpoint {path} is not an azhpc checkpoint of schema {CHECKPOINT_SCHEMA}: delete it and rerun the stage that writes it")
    return payload


def load_model(path: Path, expect: ModelConfig | None = None) -> tuple[AlphaZeroNet, dict[str, Any]]:
    payload = read_checkpoint(path)
    if "model_config" not in payload:
        raise CheckpointError(f"{path} is a training state, not a network: pass models/gen-NNNN.pt (the network "
                              "that training wrote)")
    try:
        cfg = ModelConfig(**payload["model_config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} has an unreadable model config ({exc})") from exc
    if expect is not None and cfg != expect:
        raise CheckpointError(f"checkpoint {path} was made for model {cfg}, the run's config says {expect}: use the run's own config")
    model = AlphaZeroNet(cfg)
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as exc:
        raise CheckpointError(f"checkpoint {path} does not fit its model config: delete it and rerun the stage that writes it") from exc
    return model, payload


def file_digest(path: os.PathLike[str] | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ensure_initial_checkpoint(path: Path, cfg: ModelConfig, seed: int) -> None:
    """Write generation 0's seeded random network once. Concurrent tasks may race: every one writes the
    same bytes from the same seed and the rename is atomic, so any winner is fine."""
    if not path.exists():
        save_checkpoint(path, build_model(cfg, seed=seed), generation=0)
