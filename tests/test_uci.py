"""azhpc uci driven by python-chess's UCI client: handshake, positions, limits, stop, and a full game."""

import shutil
import sys
import time
from pathlib import Path

import chess
import chess.engine
import numpy as np
import pytest

from alphazero_hpc.net.checkpoint import save_checkpoint
from alphazero_hpc.config import ModelConfig
from alphazero_hpc.net.model import build_model


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("uci") / "gen-0003.pt"
    save_checkpoint(ckpt, build_model(ModelConfig(blocks=1, filters=16, history=2), seed=3), generation=3)
    azhpc = shutil.which("azhpc", path=str(Path(sys.executable).parent))
    eng = chess.engine.SimpleEngine.popen_uci([azhpc, "uci", "--checkpoint", str(ckpt), "--simulations", "8",
                                               "--device", "cpu"], timeout=60)
    yield eng
    eng.quit()


def test_handshake_and_options(engine):
    assert engine.id["name"].startswith("azhpc gen 3")
    assert "Simulations" in engine.options
    engine.ping()  # isready -> readyok


def test_nodes_limit_and_info(engine):
    board = chess.Board()
    board.push_san("e4")
    info = engine.analyse(board, chess.engine.Limit(nodes=20))
    assert info["nodes"] == 21  # 20 simulations plus the root's expansion
    assert info["pv"][0] in board.legal_moves and "score" in info


def test_fen_with_moves_and_movetime(engine):
    board = chess.Board("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1")
    board.push_san("Kf1")
    board.push_san("Kf8")
    t0 = time.monotonic()
    result = engine.play(board, chess.engine.Limit(time=0.3))
    assert result.move in board.legal_moves
    assert time.monotonic() - t0 < 5


def test_infinite_search_stops_on_request(engine):
    with engine.analysis(chess.Board()) as analysis:
        time.sleep(0.5)
        analysis.stop()
        best = analysis.wait()
    assert best.move in chess.Board().legal_moves


def test_clock_limits(engine):
    result = engine.play(chess.Board(), chess.engine.Limit(white_clock=2.0, black_clock=2.0, white_inc=0.1))
    assert result.move in chess.Board().legal_moves


def test_full_game_against_a_random_mover(engine):
    rng = np.random.default_rng(0)
    board = chess.Board()
    engine.configure({"Simulations": 4})
    while not board.is_game_over(claim_draw=True) and board.ply() < 400:
        if board.turn == chess.WHITE:
            move = engine.play(board, chess.engine.Limit(nodes=4)).move
            assert move in board.legal_moves, (board.fen(), move)
        else:
            legal = list(board.legal_moves)
            move = legal[int(rng.integers(len(legal)))]
        board.push(move)
    assert board.ply() >= 10
    # the game was played through: the engine never failed to answer; ending reached or the 400-ply cap
    assert board.is_game_over(claim_draw=True) or board.ply() == 400
