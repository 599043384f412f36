"""What a self-play task leaves on disk for each complete shard: the HDF5 rows, a PGN sample of its games,
and (last: it marks the shard complete) the JSON sidecar with the row count and the games' statistics."""

from __future__ import annotations

import io
from typing import Sequence

import chess.pgn
import numpy as np

from ..config import Config
from ..store import atomic
from ..store.paths import RunPaths
from ..store.shards import ShardStats, Sidecar, write_shard, write_sidecar
from .engine import GameRecord


def records_to_arrays(records: Sequence[GameRecord], games_per_shard: int) -> dict[str, np.ndarray]:
    """The shard's datasets (docs/shard-format.md): the rows of finished games, in game order."""
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


def game_pgn(record: GameRecord, event: str) -> str:
    game = chess.pgn.Game()
    game.headers["Event"] = event
    game.headers["White"] = game.headers["Black"] = "azhpc self-play"
    game.headers["Result"] = {1: "1-0", 0: "1/2-1/2", -1: "0-1"}[record.result]
    game.headers["Termination"] = record.termination
    node: chess.pgn.GameNode = game
    for move in record.moves:
        node = node.add_variation(move)
    out = io.StringIO()
    print(game, file=out, end="\n\n")
    return out.getvalue()


def shard_stats(records: Sequence[GameRecord]) -> ShardStats:
    terms: dict[str, int] = {}
    for r in records:
        terms[r.termination] = terms.get(r.termination, 0) + 1
    return ShardStats(
        plies=sum(r.plies for r in records),
        white_wins=sum(r.result == 1 for r in records),
        draws=sum(r.result == 0 for r in records),
        black_wins=sum(r.result == -1 for r in records),
        resigned=sum(r.termination == "resignation" for r in records),
        playthrough_games=sum(r.playthrough for r in records),
        would_resign=sum(r.would_resign for r in records),
        resign_false_positives=sum(r.resign_false_positive for r in records),
        terminations=terms,
    )


def write_complete_shard(paths: RunPaths, cfg: Config, generation: int, task: int, shard: int,
                         records: list[GameRecord], attrs: dict) -> Sidecar:
    """Write a shard, its PGN sample and (last: it marks the shard complete) its sidecar; returns the sidecar."""
    arrays = records_to_arrays(records, cfg.selfplay.games_per_shard)
    rows = len(arrays["value_target"])
    size = write_shard(paths.shard(generation, task, shard), arrays, {**attrs, "shard": shard, "games": len(records)},
                       cfg.selfplay.shard_compression)
    sample = sorted(records, key=lambda r: r.spec.index)[: cfg.selfplay.pgn_games_per_shard]
    if sample:
        event = f"azhpc gen {generation} task {task} shard {shard}"
        atomic.write_text(paths.pgn(generation, task, shard), "".join(game_pgn(r, event) for r in sample), doing="writing PGN")
    sidecar = Sidecar(generation=generation, task=task, shard=shard, games=len(records), rows=rows, bytes=size,
                      bytes_per_position=size / max(rows, 1),
                      policy_entries=int(arrays["policy_count"].astype(np.int64).sum()), stats=shard_stats(records))
    write_sidecar(paths.sidecar(generation, task, shard), sidecar)
    return sidecar
