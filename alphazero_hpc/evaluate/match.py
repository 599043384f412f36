"""Matches between two players: openings, colours, the rules that end a game, and PGN.

Game ``i`` starts from opening ``i // 2`` and gives the first player White when ``i`` is even, so every
opening is played once with each colour. All games of a match (``parallel`` at a time) advance together:
each round asks each player for the moves of every game where it is to move, in one call.
"""

from __future__ import annotations

import datetime
import io
from dataclasses import dataclass
from importlib import resources
from typing import Callable, Sequence

import chess
import chess.pgn
import numpy as np

from ..errors import AzhpcError
from ..game.rules import chess_ending
from .players import Player


@dataclass(frozen=True)
class Opening:
    name: str
    moves: tuple[chess.Move, ...]


def book_openings() -> list[Opening]:
    """The balanced opening set shipped with the package (openings.txt)."""
    text = resources.files(__package__).joinpath("openings.txt").read_text()
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, sans = line.partition(":")
        board = chess.Board()
        out.append(Opening(name.strip(), tuple(board.push_san(san) for san in sans.split())))
    return out


def random_openings(count: int, plies: int, seed: int) -> list[Opening]:
    """``count`` openings of ``plies`` uniformly random legal moves (none that ends the game)."""
    rng = np.random.default_rng(seed)
    out: list[Opening] = []
    while len(out) < count:
        board = chess.Board()
        for _ in range(plies):
            legal = list(board.legal_moves)
            board.push(legal[int(rng.integers(len(legal)))])
            if board.is_game_over():
                break
        if not board.is_game_over():
            out.append(Opening(f"random {len(out)}", tuple(board.move_stack)))
    return out


def openings_from_spec(spec: str, games: int, seed: int) -> list[Opening]:
    """``book``, ``book:N`` (the book from its N-th opening on, wrapping round: successive blocks of a long match
    start where the last one stopped) or ``random:K`` (K random plies, one opening per pair of games, seeded)."""
    if spec == "book":
        return book_openings()
    kind, _, plies = spec.partition(":")
    if kind == "book" and plies.isdigit():
        book = book_openings()
        first = int(plies) % len(book)
        return book[first:] + book[:first]
    if kind == "random" and plies.isdigit() and 1 <= int(plies) <= 40:
        return random_openings((games + 1) // 2, int(plies), seed)
    raise AzhpcError(f"openings '{spec}': expected 'book' (the shipped set), 'book:N' (from its N-th opening) or "
                     "'random:K' with K in 1..40 random plies")


@dataclass
class GameOutcome:
    index: int
    first_is_white: bool
    result: str  # PGN result from White's side: 1-0, 0-1, 1/2-1/2
    termination: str
    plies: int  # plies played after the opening
    pgn: str

    @property
    def first_points(self) -> float:
        """Points of the match's first player: 1, 0.5 or 0."""
        white = {"1-0": 1.0, "0-1": 0.0}.get(self.result, 0.5)
        return white if self.first_is_white else 1.0 - white


def play_match(first: Player, second: Player, games: int, openings: Sequence[Opening], max_plies: int,
               parallel: int = 64, event: str = "azhpc evaluate", adjudicate_material: int = 0,
               on_game: Callable[[GameOutcome], None] | None = None,
               on_moves: Callable[[int, int], None] | None = None) -> list[GameOutcome]:
    """Play ``games`` games; returns them in index order. ``on_game`` hears of each game as it ends, ``on_moves``
    after each side's turn over the games in play with (games in play, moves played so far): with many games at
    once on a slow clock, no game may end for half an hour, and that is how a caller shows that they move."""
    if not openings:
        raise AzhpcError("no openings to play from")
    outcomes: list[GameOutcome] = []
    moves_played = 0
    for start in range(0, games, parallel):
        idx = list(range(start, min(games, start + parallel)))
        boards = {}
        for i in idx:
            board = chess.Board()
            for book_move in openings[(i // 2) % len(openings)].moves:
                board.push(book_move)
            boards[i] = board
        book_plies = {i: b.ply() for i, b in boards.items()}
        live = dict(boards)
        while live:
            for player, plays_white in ((first, True), (second, False)):
                # first plays White in even games: it is to move where turn == (i even)
                ids = [i for i, b in live.items() if b.turn == (plays_white == (i % 2 == 0))]
                if not ids:
                    continue
                moves = player.choose([live[i] for i in ids])
                for i, move in zip(ids, moves):
                    board = live[i]
                    end: tuple[str, str] | None
                    if move is None:
                        end = ("0-1" if board.turn == chess.WHITE else "1-0", "resignation")
                    else:
                        board.push(move)
                        end = chess_ending(board, max_plies, adjudicate_material)
                    if end is not None:
                        out = _outcome(i, board, end, first.name, second.name, event, openings, book_plies[i])
                        outcomes.append(out)
                        del live[i]
                        if on_game is not None:
                            on_game(out)
                moves_played += len(ids)
                if on_moves is not None:
                    on_moves(len(live), moves_played)
    return sorted(outcomes, key=lambda o: o.index)


def _outcome(i: int, board: chess.Board, end: tuple[str, str], first: str, second: str, event: str,
             openings: Sequence[Opening], book_plies: int) -> GameOutcome:
    first_white = i % 2 == 0
    game = chess.pgn.Game.from_board(board)
    game.headers["Event"] = event
    game.headers["Date"] = datetime.date.today().strftime("%Y.%m.%d")
    game.headers["Round"] = str(i + 1)
    game.headers["White"], game.headers["Black"] = (first, second) if first_white else (second, first)
    game.headers["Result"] = end[0]
    game.headers["Termination"] = end[1]
    game.headers["Opening"] = openings[(i // 2) % len(openings)].name
    buf = io.StringIO()
    game.accept(chess.pgn.FileExporter(buf))
    return GameOutcome(i, first_white, end[0], end[1], board.ply() - book_plies, buf.getvalue())
