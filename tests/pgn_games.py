"""PGN the tests make themselves: Stockfish (Debian's, which tests/run.sh installs) playing itself at a low depth
(``alphazero_hpc.tools.sfgames``), with Lichess-style clock comments and now and then a side line added."""

from __future__ import annotations

from pathlib import Path

import chess
import chess.engine
import chess.pgn

from alphazero_hpc.tools.sfgames import stockfish_game


def stockfish_games(stockfish: str, n_games: int, seed: int = 0, depth: int = 1, max_plies: int = 300) -> list[chess.pgn.Game]:
    games = []
    with chess.engine.SimpleEngine.popen_uci(stockfish) as engine:
        engine.configure({"Threads": 1, "Hash": 16})
        for i in range(n_games):
            game = stockfish_game(engine, i, seed, depth, max_plies)
            for k, node in enumerate(game.mainline()):
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
