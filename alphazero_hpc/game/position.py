"""Positions for the search: the compiled ``Position`` (``_movegen.c``) and its bridges to python-chess.

The search keeps one immutable ``Position`` per node and moves as ints (``from | to << 6 | promotion << 12``);
everything outside the search (games, shards, matches, UCI) keeps python-chess boards and ``chess.Move``.
python-chess is the reference for the rules: ``_movegen`` follows it to the order of the legal moves, which
``tests/test_movegen.py`` checks (perft, random games).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import chess
import numpy as np

from ..errors import ConfigError
from .encoding import NUM_MOVES, move_index, position_key

try:
    from ._movegen import Position, perft
    BUILD_ERROR: str | None = None
except ImportError as exc:  # an install without a C compiler (setup.py builds the extension as optional)
    Position = perft = None  # type: ignore[assignment,misc]
    BUILD_ERROR = str(exc)

__all__ = ["SearchPosition", "Position", "ChessPosition", "perft", "require_compiled", "search_position", "from_board", "to_board",
           "move_int", "to_move", "POLICY_INDEX", "FLIP_MOVE"]


@runtime_checkable
class SearchPosition(Protocol):
    """What the search needs of a position; the compiled ``Position`` and ``ChessPosition`` both offer it
    (``tests/test_movegen.py`` checks). Immutable: ``push`` returns the next position."""

    @property
    def pawns(self) -> int: ...
    @property
    def rooks(self) -> int: ...
    @property
    def queens(self) -> int: ...
    @property
    def turn(self) -> bool: ...
    @property
    def halfmove_clock(self) -> int: ...
    @property
    def ply(self) -> int: ...
    def key(self) -> tuple: ...
    def push(self, move: int) -> SearchPosition: ...
    def legal_moves(self) -> list[int]: ...
    def has_legal_moves(self) -> bool: ...
    def is_check(self) -> bool: ...
    def is_insufficient_material(self) -> bool: ...
    def mating_move(self) -> int | None: ...


def require_compiled() -> None:
    """One line naming the fix when the compiled move generator is asked for and was not built."""
    if BUILD_ERROR is not None:
        raise ConfigError(
            f"mcts.move_generator is compiled but alphazero_hpc/game/_movegen.c was not built ({BUILD_ERROR}): "
            "reinstall with `pip install -e .` where a C compiler and Python's headers are (Debian: apt-get install "
            "build-essential python3-dev), or set mcts.move_generator=python-chess (the same games, slower)")


FLIP_MOVE = 56 | (56 << 6)  # XOR of a move int that mirrors both squares (black's view)


def from_board(board: chess.Board) -> Position:
    """The compiled position of ``board`` (standard chess; its move stack is not kept)."""
    require_compiled()
    return Position(board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                    board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK], board.turn,
                    board.castling_rights, board.ep_square, board.halfmove_clock, board.fullmove_number)


def search_position(board: chess.Board) -> SearchPosition:
    """The compiled position of ``board`` if python-chess calls it valid, else python-chess's (``ChessPosition``):
    a position python-chess accepts but no game reaches (a FEN with two kings, a stray en-passant square, unclean
    castling rights) is searched by the reference rather than by a generator that was never checked on it."""
    if board.is_valid() and not board.promoted & board.kings:
        return from_board(board)
    return ChessPosition.of(board)


def to_board(pos: Position) -> chess.Board:
    """A python-chess board of ``pos`` (no move stack)."""
    b = chess.Board.empty()
    b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings = (pos.pawns, pos.knights, pos.bishops, pos.rooks,
                                                                  pos.queens, pos.kings)
    b.occupied_co = [pos.black, pos.white]
    b.occupied = pos.white | pos.black
    b.turn = pos.turn
    b.castling_rights = pos.castling_rights
    b.ep_square = pos.ep_square
    b.halfmove_clock = pos.halfmove_clock
    b.fullmove_number = pos.fullmove_number
    return b


def move_int(move: chess.Move) -> int:
    return move.from_square | (move.to_square << 6) | ((move.promotion or 0) << 12)


def to_move(m: int) -> chess.Move:
    return chess.Move(m & 63, (m >> 6) & 63, (m >> 12) or None)


class ChessPosition:
    """``Position``'s interface on a python-chess board: the reference the compiled one is checked against, and
    ``mcts.move_generator: python-chess`` (the same searches, slower). Owns ``board`` (no move stack)."""

    __slots__ = ("board",)

    def __init__(self, board: chess.Board) -> None:
        self.board = board

    @classmethod
    def of(cls, board: chess.Board) -> ChessPosition:
        """The position of ``board`` (a copy without its move stack)."""
        return cls(board.copy(stack=False))

    pawns = property(lambda self: self.board.pawns)
    rooks = property(lambda self: self.board.rooks)
    queens = property(lambda self: self.board.queens)
    turn = property(lambda self: self.board.turn)
    halfmove_clock = property(lambda self: self.board.halfmove_clock)
    ply = property(lambda self: self.board.ply())

    def key(self) -> tuple:
        return position_key(self.board)

    def push(self, move: int) -> ChessPosition:
        board = self.board.copy(stack=False)
        board.push(to_move(move))
        return ChessPosition(board)

    def legal_moves(self) -> list[int]:
        return [move_int(m) for m in self.board.generate_legal_moves()]

    def has_legal_moves(self) -> bool:
        return any(self.board.generate_legal_moves())

    def is_check(self) -> bool:
        return self.board.is_check()

    def is_insufficient_material(self) -> bool:
        return self.board.is_insufficient_material()

    def mating_move(self) -> int | None:
        board = self.board
        for move in board.generate_legal_moves():
            if board.gives_check(move):
                board.push(move)
                mate = board.is_checkmate()
                board.pop()
                if mate:
                    return move_int(move)
        return None


def _policy_table() -> np.ndarray:
    """[6 << 12] policy index of every move int as white plays it (black: look up ``m ^ FLIP_MOVE``); -1 where
    the int is no move with an AlphaZero index."""
    table = np.full(6 << 12, -1, dtype=np.int32)
    for m in range(6 << 12):
        frm, to, promo = m & 63, (m >> 6) & 63, m >> 12
        if promo == 1 or frm == to:
            continue
        try:
            table[m] = move_index(chess.Move(frm, to, promo or None), chess.WHITE)
        except ValueError:
            pass
    assert table.max() < NUM_MOVES
    return table


POLICY_INDEX = _policy_table()
