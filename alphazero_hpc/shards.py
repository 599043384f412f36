"""HDF5 shards of self-play positions: writing, validating and reading. Layout: docs/shard-format.md.

A shard holds the rows of a fixed set of games. It is written under a temporary name, fsynced and
renamed, and only then is its JSON sidecar (row count, stats) written the same way: a shard counts as
complete exactly when its sidecar exists, so counting never opens HDF5 and a task killed between the two
renames simply writes the shard again.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np

from . import __version__, fsutil
from .encoding import PositionBatch
from .errors import ShardError
from .selfplay import GameRecord

SHARD_SCHEMA = 1
SHARD_FORMAT = "azhpc-selfplay-shard"

# name -> (dtype, per-row trailing shape given history H, or None for the flat policy arrays)
ROW_DATASETS: dict[str, tuple[str, str]] = {
    "bitboards": ("uint64", "H,8"),
    "repetitions": ("uint8", "H"),
    "turn": ("uint8", ""),
    "castling": ("uint8", ""),
    "halfmove": ("uint8", ""),
    "policy_count": ("uint16", ""),
    "value_target": ("int8", ""),
    "root_value": ("float16", ""),
    "plies_left": ("uint16", ""),
    "ply": ("uint16", ""),
    "game_id": ("uint32", ""),
}
FLAT_DATASETS: dict[str, str] = {"policy_index": "uint16", "policy_prob": "float16"}


@dataclass
class ShardData:
    """Rows of one or more shards in memory (see docs/shard-format.md for each field)."""

    positions: PositionBatch
    policy_count: np.ndarray  # [N]
    policy_index: np.ndarray  # [M]
    policy_prob: np.ndarray  # [M]
    value_target: np.ndarray  # [N] int8, +1 win / 0 draw / -1 loss for the side to move
    root_value: np.ndarray  # [N]
    plies_left: np.ndarray  # [N]
    ply: np.ndarray  # [N]
    game_id: np.ndarray  # [N]

    def __len__(self) -> int:
        return len(self.value_target)

    @property
    def policy_offset(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.policy_count, dtype=np.int64)))


def _filters(compression: str) -> dict[str, Any]:
    if compression == "gzip":
        return {"compression": "gzip", "compression_opts": 4, "shuffle": False}
    if compression == "lzf":
        return {"compression": "lzf"}
    return {}


def records_to_arrays(records: Sequence[GameRecord], games_per_shard: int) -> dict[str, np.ndarray]:
    """Concatenate the rows of finished games, in game order."""
    records = sorted(records, key=lambda r: r.spec.index)
    cat = np.concatenate
    return {
        "bitboards": cat([r.positions.bitboards for r in records]).astype(np.uint64),
        "repetitions": cat([r.positions.repetitions for r in records]).astype(np.uint8),
        "turn": cat([r.positions.turn for r in records]).astype(np.uint8),
        "castling": cat([r.positions.castling for r in records]).astype(np.uint8),
        "halfmove": cat([r.positions.halfmove for r in records]).astype(np.uint8),
        "policy_count": cat([r.policy_counts for r in records]).astype(np.uint16),
        "value_target": cat([r.value_target for r in records]).astype(np.int8),
        "root_value": cat([r.root_value for r in records]).astype(np.float16),
        "plies_left": cat([r.plies_left for r in records]).astype(np.uint16),
        "ply": cat([r.ply for r in records]).astype(np.uint16),
        "game_id": cat([np.full(r.num_positions, r.spec.shard * games_per_shard + r.spec.index) for r in records]).astype(np.uint32),
        "policy_index": cat([r.policy_index for r in records]).astype(np.uint16),
        "policy_prob": cat([r.policy_prob for r in records]).astype(np.float16),
    }


def write_shard(path: Path, arrays: dict[str, np.ndarray], attrs: dict[str, Any], compression: str = "gzip") -> int:
    """Write one shard atomically; returns its size in bytes."""
    rows = len(arrays["value_target"])
    filters = _filters(compression)

    # Built in memory and written plainly, so a full disk is a clean OSError (ENOSPC), not an HDF5 error.
    buffer = io.BytesIO()
    with h5py.File(buffer, "w", libver="latest") as h5:
        for name, data in arrays.items():
            chunk = (min(max(len(data), 1), 4096),) + data.shape[1:] if filters else None
            h5.create_dataset(name, data=data, chunks=chunk, **(filters if len(data) else {}))
        h5.attrs["format"] = SHARD_FORMAT
        h5.attrs["schema_version"] = SHARD_SCHEMA
        h5.attrs["rows"] = rows
        h5.attrs["azhpc_version"] = __version__
        h5.attrs["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for key, value in attrs.items():
            h5.attrs[key] = value
    fsutil.write_bytes(path, buffer.getbuffer(), doing="writing shard")
    return len(buffer.getbuffer())


def read_sidecar(path: Path) -> dict[str, Any]:
    try:
        meta = fsutil.read_json(path)
    except (OSError, json.JSONDecodeError) as exc:
        raise ShardError(path, f"unreadable sidecar ({exc}); delete it and rerun the task to rewrite the shard") from exc
    schema = meta.get("schema_version") if isinstance(meta, dict) else None
    if schema != SHARD_SCHEMA:
        raise ShardError(path, f"sidecar of schema {schema}, this azhpc {__version__} reads schema {SHARD_SCHEMA}: "
                               "use the azhpc version that wrote the run, or a new --run-dir")
    return meta


def read_shard(path: Path, expect_history: int | None = None) -> tuple[ShardData, dict[str, Any]]:
    """Read and validate a whole shard; raises ShardError naming the path and the reason."""
    path = Path(path)
    try:
        h5 = h5py.File(path, "r")
    except FileNotFoundError as exc:
        raise ShardError(path, "missing") from exc
    except OSError as exc:
        raise ShardError(path, f"not a readable HDF5 file, probably truncated or corrupt ({str(exc).splitlines()[0]})") from exc
    try:
        with h5:
            attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()}
            if attrs.get("format") != SHARD_FORMAT:
                raise ShardError(path, f"not an azhpc self-play shard (format {attrs.get('format')!r})")
            if attrs.get("schema_version") != SHARD_SCHEMA:
                raise ShardError(path, f"schema {attrs.get('schema_version')}, this azhpc reads schema {SHARD_SCHEMA}")
            data = {}
            for name in list(ROW_DATASETS) + list(FLAT_DATASETS):
                if name not in h5:
                    raise ShardError(path, f"dataset {name} missing")
                data[name] = h5[name][...]
    except ShardError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise ShardError(path, f"corrupt data ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from exc
    rows = int(attrs.get("rows", -1))
    for name, (dtype, _) in ROW_DATASETS.items():
        if data[name].dtype != np.dtype(dtype) or len(data[name]) != rows:
            raise ShardError(path, f"dataset {name} has dtype {data[name].dtype} and {len(data[name])} rows, expected {dtype} and {rows}")
    history = data["bitboards"].shape[1]
    if expect_history is not None and history != expect_history:
        raise ShardError(path, f"{history} history steps, the model expects {expect_history}")
    total = int(data["policy_count"].astype(np.int64).sum())
    for name in FLAT_DATASETS:
        if len(data[name]) != total:
            raise ShardError(path, f"dataset {name} has {len(data[name])} entries, policy_count sums to {total}")
    if total and int(data["policy_index"].max()) >= 4672:
        raise ShardError(path, "policy_index out of range")
    shard = ShardData(
        positions=PositionBatch(data["bitboards"], data["repetitions"], data["turn"].astype(bool), data["castling"], data["halfmove"]),
        policy_count=data["policy_count"], policy_index=data["policy_index"], policy_prob=data["policy_prob"],
        value_target=data["value_target"], root_value=data["root_value"], plies_left=data["plies_left"],
        ply=data["ply"], game_id=data["game_id"],
    )
    return shard, attrs
