"""HDF5 shards of self-play positions: writing, validating and reading. Layout: docs/shard-format.md.

A shard holds the rows of a fixed set of games. It is written under a temporary name, fsynced and
renamed, and only then is its JSON sidecar (row count, stats) written the same way: a shard counts as
complete exactly when its sidecar exists, so counting never opens HDF5 and a task killed between the two
renames simply writes the shard again.
"""

from __future__ import annotations

import io
import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .. import __version__
from . import atomic
from ..game.encoding import PositionBatch
from ..errors import ShardError, ShardSchemaError
from .paths import RunPaths

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


def write_shard(path: Path, arrays: dict[str, np.ndarray], attrs: dict[str, Any], compression: str = "gzip") -> int:
    """Write one shard atomically; returns its size in bytes."""
    rows = len(arrays["value_target"])
    filters = _filters(compression)

    # Built in memory and written plainly, so a full disk is a clean OSError (ENOSPC), not an HDF5 error.
    buffer = io.BytesIO()
    with h5py.File(buffer, "w", libver="latest") as h5:
        for name, data in arrays.items():
            # an empty dataset (a shard whose games had no fully searched move) is stored plainly: HDF5 refuses
            # chunks larger than the data
            chunk = (min(len(data), 4096),) + data.shape[1:] if filters and len(data) else None
            h5.create_dataset(name, data=data, chunks=chunk, **(filters if len(data) else {}))
        h5.attrs["format"] = SHARD_FORMAT
        h5.attrs["schema_version"] = SHARD_SCHEMA
        h5.attrs["rows"] = rows
        h5.attrs["azhpc_version"] = __version__
        h5.attrs["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for key, value in attrs.items():
            h5.attrs[key] = value
    atomic.write_bytes(path, buffer.getbuffer(), doing="writing shard")
    return len(buffer.getbuffer())


_STAT_COUNTS = ("plies", "white_wins", "draws", "black_wins", "resigned", "playthrough_games", "would_resign",
                "resign_false_positives")


@dataclass(frozen=True)
class ShardStats:
    """Counts over the games of a shard (or, added up, of a task): plies, results, resignations, terminations."""

    plies: int = 0
    white_wins: int = 0
    draws: int = 0
    black_wins: int = 0
    resigned: int = 0
    playthrough_games: int = 0  # games that were not allowed to resign
    would_resign: int = 0  # ... where a side would have resigned
    resign_false_positives: int = 0  # ... and that side did not lose
    terminations: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> ShardStats:
        if not isinstance(data, dict):
            raise TypeError("stats is not an object")
        counts = {k: _count(data, k) for k in _STAT_COUNTS}
        terms = data.get("terminations", {})
        if not isinstance(terms, dict) or not all(isinstance(v, int) for v in terms.values()):
            raise TypeError("stats.terminations is not an object of counts")
        return cls(**counts, terminations=dict(terms))


@dataclass(frozen=True)
class Sidecar:
    """A complete shard's JSON sidecar: the trainer and ``status`` count rows and games without opening HDF5."""

    generation: int
    task: int
    shard: int
    games: int
    rows: int
    bytes: int
    bytes_per_position: float
    policy_entries: int
    stats: ShardStats
    schema_version: int = SHARD_SCHEMA
    source: dict[str, Any] = field(default_factory=dict)  # imported shards: where in the PGN input the shard ends

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.source:
            del data["source"]  # self-play sidecars stay as they were
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sidecar:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        missing = [f.name for f in fields(cls) if f.name not in data and f.name not in ("schema_version", "source")]
        if missing:
            raise KeyError(", ".join(missing))
        for key in ("generation", "task", "shard", "games", "rows", "bytes", "policy_entries"):
            _count(values, key)
        if not isinstance(values["bytes_per_position"], (int, float)):
            raise TypeError("bytes_per_position is not a number")
        values["stats"] = ShardStats.from_json(values["stats"])
        if not isinstance(values.get("source", {}), dict):
            raise TypeError("source is not an object")
        return cls(**values)


def _count(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{key} is {value!r}, not a count")
    return value


def read_sidecar(path: Path) -> Sidecar:
    """A shard's sidecar, checked; a ShardError naming the path and the fix otherwise."""
    try:
        meta = atomic.read_json(path)
    except (OSError, json.JSONDecodeError) as exc:
        raise ShardError(path, f"unreadable sidecar ({exc}); delete it and rerun the task to rewrite the shard") from exc
    schema = meta.get("schema_version") if isinstance(meta, dict) else None
    if schema != SHARD_SCHEMA:
        raise ShardSchemaError(path, f"sidecar of schema {schema}, this azhpc {__version__} reads schema {SHARD_SCHEMA}: "
                                     "use the azhpc version that wrote the run, or a new --run-dir")
    try:
        return Sidecar.from_json(meta)
    except (KeyError, TypeError) as exc:
        raise ShardError(path, f"sidecar without a valid {exc}; delete it and rerun the task to rewrite the shard") from exc


QUARANTINE_SUFFIX = ".bad"


def quarantine(shard: Path) -> list[Path]:
    """Set a bad shard aside: its sidecar and the shard are renamed ``*.bad`` (the sidecar first: the shard stops
    counting as complete, so the task's rerun plays it again); kept for a post-mortem, read by nothing."""
    moved = []
    for path in (shard.with_suffix(".json"), shard):
        try:
            os.replace(path, path.with_name(path.name + QUARANTINE_SUFFIX))
            moved.append(path)
        except FileNotFoundError:
            pass  # another rank or worker set it aside first
    return moved


def write_sidecar(path: Path, sidecar: Sidecar) -> None:
    atomic.write_json(path, sidecar.to_json(), doing="writing shard sidecar")


class SidecarCache:
    """Sidecars read once: a sidecar is written once, atomically, so an unchanged (mtime, size) means unchanged
    contents. ``azhpc status --watch`` and ``--wait`` refresh every few seconds on shared storage (Lustre, NFS),
    where a small read costs far more than a stat: each refresh reads only the sidecars written since."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple[int, int], Sidecar | None]] = {}

    def read(self, path: Path) -> Sidecar | None:
        """The sidecar, or None when it cannot be read (it counts as a shard without games: the trainer says why)."""
        try:
            st = path.stat()
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        hit = self._seen.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        try:
            meta: Sidecar | None = read_sidecar(path)
        except ShardError:
            meta = None
        self._seen[path] = (key, meta)
        return meta


def generation_totals(paths: RunPaths, generation: int, cache: SidecarCache | None = None) -> tuple[int, int, int]:
    """(games, positions, shards) of a generation's complete shards, from the sidecars (a sidecar that
    cannot be read counts as a shard but adds no games or positions: the trainer reports and skips it)."""
    cache = cache or SidecarCache()
    games = positions = shards = 0
    for sidecar in paths.sidecars(generation):
        shards += 1
        meta = cache.read(sidecar)
        if meta is not None:
            games += meta.games
            positions += meta.rows
    return games, positions, shards


def _corrupt(path: Path, exc: BaseException) -> ShardError:
    return ShardError(path, f"corrupt data ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")


def _open_shard(path: Path) -> tuple[h5py.File, dict[str, Any]]:
    """The open shard and its attributes, once the file opens (HDF5 superblock and end of file) and is an azhpc
    shard of this schema; a ShardError naming the path and the reason otherwise (the file closed)."""
    try:
        h5 = h5py.File(path, "r")
    except FileNotFoundError as exc:
        raise ShardError(path, "missing") from exc
    except OSError as exc:
        raise ShardError(path, f"not a readable HDF5 file, probably truncated or corrupt ({str(exc).splitlines()[0]})") from exc
    try:
        attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()}
        if attrs.get("format") != SHARD_FORMAT:
            raise ShardError(path, f"not an azhpc self-play shard (format {attrs.get('format')!r})")
        if attrs.get("schema_version") != SHARD_SCHEMA:
            raise ShardSchemaError(path, f"schema {attrs.get('schema_version')}, this azhpc reads schema {SHARD_SCHEMA}")
    except BaseException as exc:
        h5.close()
        if isinstance(exc, (OSError, KeyError, ValueError)):
            raise _corrupt(path, exc) from exc
        raise
    return h5, attrs


def check_shard(path: Path, rows: int) -> None:
    """Open a shard without reading its data (``_open_shard``, then the row count of ``value_target``): what a
    truncated, overwritten or foreign file fails. Raises ShardError like read_shard."""
    h5, _ = _open_shard(Path(path))
    try:
        with h5:
            found = h5["value_target"].shape[0] if "value_target" in h5 else -1
    except (OSError, KeyError, ValueError) as exc:
        raise _corrupt(path, exc) from exc
    if found != rows:
        raise ShardError(path, f"{found} rows, its sidecar says {rows}")


def read_shard(path: Path, expect_history: int | None = None) -> tuple[ShardData, dict[str, Any]]:
    """Read and validate a whole shard; raises ShardError naming the path and the reason."""
    path = Path(path)
    h5, attrs = _open_shard(path)
    try:
        with h5:
            data = {}
            for name in list(ROW_DATASETS) + list(FLAT_DATASETS):
                if name not in h5:
                    raise ShardError(path, f"dataset {name} missing")
                data[name] = h5[name][...]
    except ShardError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise _corrupt(path, exc) from exc
    rows = int(attrs.get("rows", -1))
    for name, (dtype, _) in ROW_DATASETS.items():
        if data[name].dtype != np.dtype(dtype) or len(data[name]) != rows:
            raise ShardError(path, f"dataset {name} has dtype {data[name].dtype} and {len(data[name])} rows, expected {dtype} and {rows}")
    if data["bitboards"].ndim != 3 or data["bitboards"].shape[2] != 8:
        raise ShardError(path, f"bitboards have shape {data['bitboards'].shape}, expected [rows, history, 8]")
    history = data["bitboards"].shape[1]
    if data["repetitions"].shape != (rows, history):
        raise ShardError(path, f"repetitions have shape {data['repetitions'].shape}, expected [{rows}, {history}]")
    if rows and not np.isin(data["value_target"], (-1, 0, 1)).all():
        raise ShardError(path, "value_target holds values other than -1, 0 and 1")
    if not np.isfinite(data["root_value"]).all():
        raise ShardError(path, "root_value is not finite")
    if expect_history is not None and history != expect_history:
        raise ShardError(path, f"{history} history steps, the model expects {expect_history}")
    total = int(data["policy_count"].astype(np.int64).sum())
    for name in FLAT_DATASETS:
        if len(data[name]) != total:
            raise ShardError(path, f"dataset {name} has {len(data[name])} entries, policy_count sums to {total}")
    if total and int(data["policy_index"].max()) >= 4672:
        raise ShardError(path, "policy_index out of range")
    if total and not (np.isfinite(data["policy_prob"]).all() and (data["policy_prob"] >= 0).all()):
        raise ShardError(path, "policy_prob holds negative or non-finite values")
    shard = ShardData(
        positions=PositionBatch(data["bitboards"], data["repetitions"], data["turn"].astype(bool), data["castling"], data["halfmove"]),
        policy_count=data["policy_count"], policy_index=data["policy_index"], policy_prob=data["policy_prob"],
        value_target=data["value_target"], root_value=data["root_value"], plies_left=data["plies_left"],
        ply=data["ply"], game_id=data["game_id"],
    )
    return shard, attrs
