"""Golden runs: a seeded self-play task and a few evaluation searches give exactly what they gave before the
package was split into folders (recorded on commit 4401a0c, the last commit of the flat layout).

The evaluator is ``MaterialEvaluator`` (numpy, deterministic on every machine), so the figures test the search,
the self-play engine, the encoding and the shard writer, not torch's float arithmetic. A shard is digested by
its datasets (name, dtype, shape, bytes) and attributes, all but ``created`` (a timestamp) and ``config_sha256``
(a new config key with a default changes it, not the games); sidecars and PGN samples byte for byte.

A change that is meant to alter games or the shard format (a new search rule, a new dataset) changes these
digests: check that it was meant, then record the new ones (print ``digest_run`` of the run below) and say so
in the commit.
"""

import dataclasses
import hashlib
import json
from pathlib import Path

import chess
import h5py
import pytest

from alphazero_hpc.config import MCTSConfig
from alphazero_hpc.evaluate.match import book_openings, play_match
from alphazero_hpc.evaluate.players import NetPlayer, RandomPlayer
from alphazero_hpc.game.rules import search_rules
from alphazero_hpc.search.api import TreeSearch
from alphazero_hpc.search.fakes import MaterialEvaluator
from alphazero_hpc.selfplay.task import run_selfplay_task

from .conftest import TINY

SELFPLAY = ["selfplay.games_per_generation=8", "selfplay.games_per_shard=4", "selfplay.max_plies=70",
            "selfplay.adjudicate_material=3", "selfplay.temperature_plies=10", "selfplay.resign_threshold=-0.97",
            "selfplay.resign_playthrough=0.3"]  # on configs/tiny.yaml: playout caps, noise, resignation, adjudication

GOLDEN_SHARDS = {
    "selfplay/gen-0000/task-0000/shard-00000.h5": "c3f1541d4055cd8d",
    "selfplay/gen-0000/task-0000/shard-00000.json": "d2986585d7a94066",
    "selfplay/gen-0000/task-0000/shard-00000.pgn": "b87e4ff879e91eb5",
    "selfplay/gen-0000/task-0000/shard-00001.h5": "337ac5a230d2eb61",
    "selfplay/gen-0000/task-0000/shard-00001.json": "c9202ddde70bddee",
    "selfplay/gen-0000/task-0000/shard-00001.pgn": "726beb978c5321b7",
}

# (best move, root visits, root value, principal variation) of 24 simulations, no noise.
GOLDEN_SEARCHES = [
    ("g1h3", 25, 0.0, ["g1h3", "g8h6"]),
    ("e5d7", 25, 0.254451, ["e5d7", "h8g8", "d7f8", "g8h8", "f8h7"]),
    ("d1d8", 25, 0.939377, ["d1d8"]),
]
GOLDEN_FENS = [chess.STARTING_FEN, "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
               "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1"]
GOLDEN_MATCH = "cc9aae822ba5cee9"


def digest_run(run: Path) -> dict[str, str]:
    out = {}
    for f in sorted(run.glob("selfplay/gen-*/task-*/shard-*")):
        h = hashlib.sha256()
        if f.suffix == ".h5":
            with h5py.File(f, "r") as h5:
                for name in sorted(h5):
                    d = h5[name][...]
                    h.update(f"{name}|{d.dtype.str}|{d.shape}|".encode())
                    h.update(d.tobytes())
                for k in sorted(h5.attrs):
                    if k not in ("created", "config_sha256"):
                        h.update(f"{k}={h5.attrs[k]!r}".encode())
        else:
            h.update(f.read_bytes())
        out[str(f.relative_to(run))] = h.hexdigest()[:16]
    return out


@pytest.mark.parametrize("move_generator", ["compiled", "python-chess"])
def test_a_seeded_selfplay_task_writes_the_recorded_shards(tmp_path, move_generator):
    """Recorded with python-chess as the search's move generator: the compiled one plays the same games."""
    run_selfplay_task(tmp_path / "run", 0, 0, 1, TINY, SELFPLAY + [f"mcts.move_generator={move_generator}"],
                      evaluator=MaterialEvaluator(2))
    assert digest_run(tmp_path / "run") == GOLDEN_SHARDS


def test_the_digest_sees_a_different_game(tmp_path):
    """The comparison above can fail: another seed plays other games and every file's digest changes."""
    run_selfplay_task(tmp_path / "run", 0, 0, 1, TINY, SELFPLAY + ["run.seed=1"], evaluator=MaterialEvaluator(2))
    got = digest_run(tmp_path / "run")
    assert got.keys() == GOLDEN_SHARDS.keys()
    assert all(got[k] != GOLDEN_SHARDS[k] for k in got if k.endswith((".h5", ".pgn")))


def test_evaluation_searches_and_a_match_are_the_recorded_ones():
    mcts = dataclasses.replace(MCTSConfig(), dirichlet_epsilon=0.0)
    results = TreeSearch(MaterialEvaluator(2), mcts, search_rules(200), 2).search([chess.Board(f) for f in GOLDEN_FENS], 24)
    got = [(r.best_move.uci(), r.root_visits, round(r.value, 6), [m.uci() for m in r.pv]) for r in results]
    assert got == GOLDEN_SEARCHES
    net = NetPlayer(MaterialEvaluator(2), MCTSConfig(), 24, search_rules(200), "net")
    games = play_match(net, RandomPlayer(7), 4, book_openings(), 60, parallel=4)
    moves = [(o.result, o.termination, o.plies, o.pgn.split("\n\n", 1)[1]) for o in games]
    assert hashlib.sha256(json.dumps(moves).encode()).hexdigest()[:16] == GOLDEN_MATCH
