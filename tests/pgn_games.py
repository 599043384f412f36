"""PGN the tests make themselves: Stockfish (Debian's, which tests/run.sh installs) playing itself at a low depth
from a few random opening plies, with ratings and time controls varied so that the import's filters have work."""

from __future__ import annotations

import random
from pathlib import Path

import chess
import chess.engine
import chess.pgn

SPEED_TCS = ["60+0", "180+2", "300+3", "600+5", "1800+20"]  # bullet, blitz, blitz, rapid, classical


def stockfish_games(stockfish: str, n_games: int, seed: int = 0, depth: int = 1, max_plies: int = 300) -> list[chess.pgn.Game]:
    rng = random.Random(seed)
    games = []
    with chess.engine.SimpleEngine.popen_uci(stockfish) as engine:
        engine.configure({"Threads": 1, "Hash": 16})
        for i in range(n_games):
            board = chess.Board()
            for _ in range(rng.randint(2, 6)):
                board.push(rng.choice(list(board.legal_moves)))
            while not board.is_game_over(claim_draw=True) and board.ply() < max_plies:
                board.push(engine.play(board, chess.engine.Limit(depth=depth)).move)
            game = chess.pgn.Game.from_board(board)
            game.headers["Event"] = f"azhpc test {seed}"
            game.headers["Round"] = str(i + 1)
            game.headers["Result"] = board.result(claim_draw=True) if board.is_game_over(claim_draw=True) else "1/2-1/2"
            game.headers["WhiteElo"] = str(1500 + 100 * (i % 8))
            game.headers["BlackElo"] = str(2200 - 100 * (i % 5))
            game.headers["TimeControl"] = SPEED_TCS[i % len(SPEED_TCS)]
            for k, node in enumerate(game.mainline()):  # Lichess's clock comments, and a side line now and then
                node.comment = f"[%clk 0:0{k % 10}:00]"
                if k == 3 and i % 3 == 0:
                    side = [m for m in node.parent.board().legal_moves if m != node.move]
                    if side:
                        node.parent.add_variation(side[0]).comment = "a side line"
            games.append(game)
    return games


def write_pgn(path: Path, games: list[chess.pgn.Game], extra: str = "") -> Path:
    """The games as one PGN file (``extra``, more PGN text, after them)."""
    path.write_text("".join(f"{game}\n\n" for game in games) + extra)
    return path
