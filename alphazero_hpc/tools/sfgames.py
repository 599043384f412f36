"""Games for trying ``azhpc import-pgn`` without a download: Stockfish playing itself at a low depth from a few
random opening plies (seeded per game, so the same arguments give the same file whatever the worker count).
Ratings and time controls in the tags vary by game number, so that the import's filters have work."""

from __future__ import annotations

import random
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import chess
import chess.engine
import chess.pgn

SPEED_TCS = ["60+0", "180+2", "300+3", "600+5", "1800+20"]  # bullet, blitz, blitz, rapid, classical


def stockfish_game(engine: chess.engine.SimpleEngine, number: int, seed: int, depth: int, max_plies: int) -> chess.pgn.Game:
    """Game ``number`` of the set ``seed``: 2-6 random plies, then Stockfish at ``depth`` for both sides."""
    rng = random.Random(seed * 1_000_003 + number)
    board = chess.Board()
    for _ in range(rng.randint(2, 6)):
        moves = list(board.legal_moves)
        if not moves:  # a random opening can mate (1. f3 e5 2. g4 Qh4#)
            break
        board.push(rng.choice(moves))
    while not board.is_game_over(claim_draw=True) and board.ply() < max_plies:
        move = engine.play(board, chess.engine.Limit(depth=depth)).move
        if move is None:  # the engine gave no move (it resigned): the game ends unfinished
            break
        board.push(move)
    game = chess.pgn.Game.from_board(board)
    over = board.is_game_over(claim_draw=True)
    game.headers.update({"Event": f"azhpc stockfish depth {depth} set {seed}", "Round": str(number + 1),
                         "White": "Stockfish", "Black": "Stockfish",
                         "Result": board.result(claim_draw=True) if over else "1/2-1/2",
                         "WhiteElo": str(1500 + 100 * (number % 8)), "BlackElo": str(2200 - 100 * (number % 5)),
                         "TimeControl": SPEED_TCS[number % len(SPEED_TCS)]})
    return game


def _play(args: tuple[str, list[int], int, int, int]) -> list[str]:
    stockfish, numbers, seed, depth, max_plies = args
    with chess.engine.SimpleEngine.popen_uci(stockfish) as engine:
        engine.configure({"Threads": 1, "Hash": 16})
        return [str(stockfish_game(engine, n, seed, depth, max_plies)) for n in numbers]


def write_stockfish_pgn(path: Path, stockfish: str, games: int, seed: int = 0, depth: int = 2, max_plies: int = 300,
                        workers: int = 1) -> Path:
    """``games`` Stockfish games as one PGN file, played by ``workers`` processes (one engine each)."""
    parts = [(stockfish, list(range(w, games, workers)), seed, depth, max_plies) for w in range(max(1, workers))]
    if workers > 1:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            done = list(pool.map(_play, parts))
    else:
        done = [_play(parts[0])]
    by_number = {n: text for part, texts in zip(parts, done) for n, text in zip(part[1], texts)}
    path.write_text("".join(by_number[n] + "\n\n" for n in range(games)))
    return path
