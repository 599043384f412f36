"""Training data: the replay window of recent shards, split across ranks, read in whole shards.

Planning reads only sidecars (row counts). The order of training rows is an index-level plan, a pure function
of (seed, generation, rank, batch number): rows of a group of shards are shuffled together in memory and cut
into batches. Resuming at step s therefore only advances the plan; no data is read to skip. DataLoader
workers open HDF5 files themselves (never before the fork), each reading whole shards and serving its share
of the batches (batch i goes to worker i % num_workers, which is the order DataLoader returns them in).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ..game.encoding import NUM_MOVES, encode_batch
from ..game.rules import PIECE_VALUES
from ..errors import AzhpcError, ShardError, ShardSchemaError
from ..arrays import ragged_ranges
from ..store.paths import RunPaths
from ..cluster.preempt import ignore_stop_signals
from ..store import atomic
from ..store.progress import read_task_progress
from ..store.shards import ShardData, check_shard, quarantine, read_shard, read_sidecar


@dataclass(frozen=True)
class ShardRef:
    path: str
    rows: int
    generation: int


def replay_window(paths: RunPaths, generation: int, window_generations: int, window_positions: int = 0) -> list[ShardRef]:
    """Complete shards of generations G - window + 1 .. G, from sidecars only; with ``window_positions`` only
    the newest shards up to that many positions (at least one shard)."""
    refs: list[ShardRef] = []
    for gen in range(generation, max(0, generation - window_generations + 1) - 1, -1):
        for task in paths.tasks(gen):
            for shard in paths.complete_shards(gen, task):
                try:
                    meta = read_sidecar(paths.sidecar(gen, task, shard))
                except ShardError as exc:
                    quarantine(paths.shard(gen, task, shard))
                    print(f"azhpc train: skipping {exc} (set aside as .bad)",
                          file=sys.stderr, flush=True)
                    continue
                if meta.rows > 0:
                    refs.append(ShardRef(str(paths.shard(gen, task, shard)), meta.rows, gen))
    if window_positions:
        kept: list[ShardRef] = []
        total = 0
        for ref in refs:  # newest generation first
            if kept and total + ref.rows > window_positions:
                break
            kept.append(ref)
            total += ref.rows
        refs = kept
    return refs


def set_aside_bad_new_shards(paths: RunPaths, generation: int) -> list[str]:
    """Open every complete shard of ``generation`` (check_shard: no data read) before it is trained on. A shard
    that does not open (truncated, overwritten, foreign) is set aside (``.bad``) and its task's progress is marked
    stopped, so that ``azhpc resume`` plays the shard again before the generation trains: its games are not lost.
    Returns one line per shard set aside. Shards of older generations are trained on already; a bad one is skipped."""
    lines = []
    for task in paths.tasks(generation):
        for shard in paths.complete_shards(generation, task):
            path = paths.shard(generation, task, shard)
            try:
                check_shard(path, read_sidecar(paths.sidecar(generation, task, shard)).rows)
            except ShardSchemaError:
                raise
            except ShardError as exc:
                quarantine(path)
                progress = read_task_progress(paths.progress(generation, task))
                if progress is not None and progress.status == "done":
                    progress.status, progress.error = "stopped", f"shard {shard} set aside by training: {exc}"
                    atomic.write_json(paths.progress(generation, task), progress.to_json(), doing="writing progress")
                lines.append(f"{exc}: set aside as .bad")
    return lines


def imported_window(paths: RunPaths) -> list[ShardRef]:
    """Every complete imported shard (``azhpc import-pgn``), from sidecars only: what pretraining trains on."""
    refs = []
    for task in paths.import_tasks():
        for shard in paths.import_complete_shards(task):
            try:
                meta = read_sidecar(paths.import_sidecar(task, shard))
            except ShardError as exc:
                raise AzhpcError(f"{exc}: delete it and its shard, then rerun azhpc import-pgn (it writes them again)") from exc
            if meta.rows > 0:
                refs.append(ShardRef(str(paths.import_shard(task, shard)), meta.rows, -1))
    return refs


def new_positions(paths: RunPaths, generation: int) -> int:
    return sum(r.rows for r in replay_window(paths, generation, 1))


class BatchPlan:
    """Which (shard, row) pairs form each batch of one rank. Deterministic, infinite, cheap to skip."""

    def __init__(self, shards: list[ShardRef], batch_size: int, seed: tuple[int, ...], group: int = 8) -> None:
        if not shards:
            raise AzhpcError("this rank has no shards to train on: produce more self-play data or use fewer ranks")
        self.shards = shards
        self.batch_size = batch_size
        self.seed = seed
        self.group = group

    def batches(self, start: int = 0) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield (batch number, shard ids [b], row ids [b]) from batch ``start`` on."""
        number = 0
        epoch = 0
        carry_s = np.empty(0, np.int64)
        carry_r = np.empty(0, np.int64)
        b = self.batch_size
        while True:
            rng = np.random.default_rng([*self.seed, epoch])
            order = rng.permutation(len(self.shards))
            for g0 in range(0, len(order), self.group):
                ids = order[g0 : g0 + self.group]
                counts = np.array([self.shards[i].rows for i in ids])
                s = np.concatenate([carry_s, np.repeat(ids, counts)])
                r = np.concatenate([carry_r] + [np.arange(c) for c in counts])
                perm = rng.permutation(len(s))
                s, r = s[perm], r[perm]
                full = len(s) // b
                for k in range(full):
                    if number >= start:
                        yield number, s[k * b : (k + 1) * b], r[k * b : (k + 1) * b]
                    number += 1
                carry_s, carry_r = s[full * b :], r[full * b :]
            epoch += 1


def decode(data: ShardData, rows: np.ndarray, q_ratio: float = 0.0, attacks: int = 0,
           material: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Network inputs and targets of ``rows`` of ``data``. The value target is the game's result as a class
    (0 win, 1 draw, 2 loss); with ``q_ratio`` > 0 a win/draw/loss distribution mixing it with the search's root
    value q: (1 - r) * result + r * (max(q, 0), 1 - |q|, max(-q, 0)), whose expectation is the mixed value.
    ``material`` ([len(data)], ``material_gain``): its rows become the material head's target, in units of 3 pawns."""
    from ..game.encoding import PositionBatch

    pos = data.positions
    batch = PositionBatch(pos.bitboards[rows], pos.repetitions[rows], pos.turn[rows], pos.castling[rows], pos.halfmove[rows])
    counts = data.policy_count[rows].astype(np.int64)
    flat = ragged_ranges(data.policy_offset[rows], counts)
    policy = np.zeros((len(rows), NUM_MOVES), np.float32)
    policy[np.repeat(np.arange(len(rows)), counts), data.policy_index[flat].astype(np.int64)] = data.policy_prob[flat]
    out = {
        "planes": encode_batch(batch, attacks=attacks),
        "policy": policy,
        "wdl": wdl_target(data.value_target[rows], data.root_value[rows], q_ratio),
    }
    if material is not None:
        out["material"] = material[rows] / 3.0
    return out


def _later_rows(data: ShardData, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row: the row of the first recorded position of its game at least ``horizon`` plies on, whether
    there is one, and the game's last recorded row (the row itself or later). Rows of one game need not be
    contiguous or in order; games are told apart by ``game_id`` within ``data``."""
    game = data.game_id.astype(np.int64)
    key = (game << 32) | data.ply.astype(np.int64)
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    at = np.searchsorted(ordered, key + horizon)
    later = order[np.minimum(at, len(key) - 1)]
    found = (at < len(key)) & (game[later] == game)
    last = order[np.searchsorted(ordered, (game << 32) | 0xFFFFFFFF, side="right") - 1]
    return later, found, last


def later_value(data: ShardData, horizon: int) -> np.ndarray:
    """[N] float32: for each row, the search's root value of the first recorded position of its game at least
    ``horizon`` plies on, from the row's side to move (negated across an odd number of plies); where the game has
    no recorded position that far on, the game's result. A target that has seen the next few moves happen: a piece
    left en prise at the row is taken by then, and the value of the position after the capture knows the material."""
    later, found, _ = _later_rows(data, horizon)
    ply = data.ply.astype(np.int64)
    sign = np.where((ply[later] - ply) % 2 == 0, 1.0, -1.0)
    value = np.where(found, sign * data.root_value[later].astype(np.float32), data.value_target.astype(np.float32))
    return value.astype(np.float32)


def white_material(bitboards: np.ndarray) -> np.ndarray:
    """[N] float32: White's material minus Black's in pawns (P 1, N 3, B 3, R 5, Q 9) of the newest position of
    each row of ``bitboards`` [N, H, 8] (``PositionBatch``: P, N, B, R, Q, K, white, black)."""
    now = bitboards[:, 0, :]
    white, black = now[:, 6:7], now[:, 7:8]
    counts = np.bitwise_count(now[:, :5] & white).astype(np.float32) - np.bitwise_count(now[:, :5] & black)
    return counts @ PIECE_VALUES[:5]


def material_gain(data: ShardData, horizon: int) -> np.ndarray:
    """[N] float32: for each row, the material balance of the first recorded position of its game at least
    ``horizon`` plies on (the game's last recorded position where there is none that far), less the row's own, in
    pawns from the row's side to move: positive where the side to move wins material over the next plies.
    ``model.material_head``'s target."""
    later, found, last = _later_rows(data, horizon)
    white = white_material(data.positions.bitboards)
    gain = white[np.where(found, later, last)] - white
    return np.where(data.positions.turn, gain, -gain).astype(np.float32)


def wdl_target(value_target: np.ndarray, root_value: np.ndarray, q_ratio: float) -> np.ndarray:
    """[B] class indices (``q_ratio`` 0: +1 win -> 0, 0 draw -> 1, -1 loss -> 2) or [B, 3] float32 distributions."""
    classes = 1 - value_target.astype(np.int64)
    if q_ratio <= 0:
        return classes
    q = np.clip(root_value.astype(np.float32), -1.0, 1.0)
    search = np.stack([np.maximum(q, 0.0), 1.0 - np.abs(q), np.maximum(-q, 0.0)], axis=1)
    return ((1.0 - q_ratio) * np.eye(3, dtype=np.float32)[classes] + q_ratio * search).astype(np.float32)


class WindowDataset(IterableDataset):
    """Batches of one rank, from batch ``start`` on. Each item is a dict of tensors plus ``bad`` shard notes."""

    def __init__(self, plan: BatchPlan, start: int = 0, cache: int = 16, q_ratio: float = 0.0, attacks: int = 0,
                 horizon: int = 0, material_horizon: int = 0) -> None:
        self.plan = plan
        self.start = start
        self.cache = cache
        self.q_ratio = q_ratio
        self.attacks = attacks
        self.horizon = horizon
        self.material_horizon = material_horizon  # > 0: batches carry material_gain targets (model.material_head)

    def __iter__(self) -> Iterator[dict]:
        info = get_worker_info()
        wid, nworkers = (info.id, info.num_workers) if info else (0, 1)
        os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")
        loaded: dict[int, ShardData | None] = {}
        gains: dict[int, np.ndarray] = {}  # material_gain of each loaded shard, worked out once per read
        bad: list[str] = []
        for number, sids, rows in self.plan.batches(self.start):
            if number % nworkers != wid:
                continue
            parts = []
            for sid in np.unique(sids):
                if sid not in loaded:
                    if len(loaded) >= self.cache:
                        oldest = next(iter(loaded))
                        loaded.pop(oldest)
                        gains.pop(oldest, None)
                    ref = self.plan.shards[sid]
                    try:
                        shard = read_shard(Path(ref.path))[0]
                        if len(shard) != ref.rows:
                            raise ShardError(ref.path, f"{len(shard)} rows, its sidecar says {ref.rows}")
                        if self.material_horizon:
                            gains[sid] = material_gain(shard, self.material_horizon)
                        if self.horizon:  # once per shard read: the root value that decode mixes in is the later one
                            shard = replace(shard, root_value=later_value(shard, self.horizon))
                        loaded[sid] = shard
                    except ShardError as exc:
                        loaded[sid] = None
                        quarantine(Path(ref.path))
                        bad.append(f"{exc} (set aside as .bad and skipped)")
                data = loaded[sid]
                if data is not None:
                    parts.append(decode(data, rows[sids == sid], self.q_ratio, self.attacks, gains.get(sid)))
            out = {"number": number, "bad": bad, "rows": len(rows)}
            bad = []
            if parts:
                out.update({k: torch.from_numpy(np.concatenate([p[k] for p in parts])) for k in parts[0]})
            yield out


def make_loader(plan: BatchPlan, start: int, workers: int, q_ratio: float = 0.0, attacks: int = 0,
                pin: bool = False, horizon: int = 0, material_horizon: int = 0) -> DataLoader:
    """The rank's batches from batch ``start`` on; ``pin``: in page-locked memory (a CUDA rank), so that copying a
    batch to the GPU overlaps the step instead of waiting for it."""
    return DataLoader(WindowDataset(plan, start, q_ratio=q_ratio, attacks=attacks, horizon=horizon,
                                    material_horizon=material_horizon), batch_size=None, num_workers=workers,
                      persistent_workers=False, prefetch_factor=4 if workers else None, pin_memory=pin,
                      multiprocessing_context="spawn" if workers else None, worker_init_fn=_worker_init if workers else None)


def _worker_init(worker_id: int) -> None:  # noqa: ARG001
    ignore_stop_signals()  # SLURM signals every process of the step; the rank decides when to stop
