"""How a game ends: the one place that decides it, for the search, self-play and evaluation matches.

Two rule sets, both decided here:

- ``Rules`` (self-play and the search): a position ends the game at ``repetitions_for_draw`` occurrences,
  ``no_progress_plies`` plies without capture or pawn move, no legal move (mate or stalemate), insufficient
  material, or ``max_plies``. ``Rules.end_value`` is the search's hot path (one call per new node, on
  the compiled ``game.position.Position``);
  ``Rules.termination`` names the reason once a game has ended.
- ``chess_ending`` (evaluation matches): python-chess's outcome, threefold repetition and the fifty-move
  rule claimed at once, and a move limit.

Either may score a draw by rule as a win for a side far enough ahead in material (``material_winner``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import chess
import numpy as np

if TYPE_CHECKING:
    from .position import SearchPosition

PIECE_VALUES = np.array([1.0, 3.0, 3.0, 5.0, 9.0, 0.0], dtype=np.float32)  # P N B R Q K
_POINTS = tuple(zip(chess.PIECE_TYPES, PIECE_VALUES.astype(int).tolist()))  # the same values, per python-chess piece
NOT_TERMINAL = math.nan
PROVEN_WIN = 1.0  # end_value of a position whose side to move mates in one (Rules.mate_in_one): won, not over

# Terminations of self-play games that end in a draw by rule (material adjudication may score them).
MAX_PLIES = "max plies"  # the termination of a game cut at its ply limit
DRAWS_BY_RULE = (MAX_PLIES, "repetition", "no progress")
ADJUDICATED = "material adjudication"  # a termination that starts with this was scored on material, not played out


def material_balance(board: chess.Board) -> int:
    """White's material minus Black's in pawns (P 1, N 3, B 3, R 5, Q 9)."""
    return sum(points * (chess.popcount(board.pieces_mask(piece, chess.WHITE)) - chess.popcount(board.pieces_mask(piece, chess.BLACK)))
               for piece, points in _POINTS)


def material_winner(board: chess.Board, threshold: int) -> int:
    """+1 if White is at least ``threshold`` pawns of material ahead, -1 if Black is, else 0 (also when
    ``threshold`` is 0: no adjudication). Self-play and evaluation adjudicate draws by rule with it."""
    if threshold <= 0:
        return 0
    balance = material_balance(board)
    return (1 if balance > 0 else -1) if abs(balance) >= threshold else 0


@dataclass(frozen=True)
class Rules:
    """When a position ends the game (the search and the game use the same rules)."""

    repetitions_for_draw: int = 3
    no_progress_plies: int = 100
    max_plies: int = 512
    mate_in_one: bool = False  # the search's own proof: a side to move that mates in one has won (mcts.mate_in_one)

    def end_value(self, pos: SearchPosition, repetitions: int) -> float:
        """The value for the side to move if these rules end the game at ``pos``: -1 (checkmated) or 0 (a draw);
        with ``mate_in_one`` also +1 (``PROVEN_WIN``) where the side to move mates in one: the game is not over,
        but the search knows its value without the network (``Forest.reopen`` clears it once the node is a game's
        root); NaN while the game goes on. ``repetitions``: earlier occurrences of the position. The search calls
        this once per new node (a compiled ``Position``), so the cheap tests come first."""
        if repetitions + 1 >= self.repetitions_for_draw:
            return 0.0
        if not pos.has_legal_moves():
            return -1.0 if pos.is_check() else 0.0
        if pos.halfmove_clock >= self.no_progress_plies:
            return 0.0
        if not (pos.pawns | pos.rooks | pos.queens) and pos.is_insufficient_material():
            return 0.0
        if pos.ply >= self.max_plies:
            return 0.0
        if self.mate_in_one and pos.mating_move() is not None:
            return PROVEN_WIN
        return NOT_TERMINAL

    def termination(self, board: chess.Board, repetitions: int) -> str:
        """Why a game that these rules ended is over (``repetitions``: earlier occurrences of its position)."""
        if board.is_checkmate():
            return "checkmate"
        if board.is_stalemate():
            return "stalemate"
        if board.is_insufficient_material():
            return "insufficient material"
        if repetitions + 1 >= self.repetitions_for_draw:
            return "repetition"
        if board.halfmove_clock >= self.no_progress_plies:
            return "no progress"
        return MAX_PLIES


def search_rules(max_plies: int, mate_in_one: bool = False) -> Rules:
    """What an evaluating network's search (not the game) counts as the end: as lc0 does, a position seen before
    in the game or the tree is a draw, so a side that is ahead makes progress instead of repeating moves until
    the threefold claim (the learning run's networks drew 19 of 20 won games against random that way;
    docs/evaluation-log.md, "What was wrong, and what fixed it"). The game itself ends by the rules of chess (``chess_ending``)."""
    return Rules(repetitions_for_draw=2, no_progress_plies=100, max_plies=max_plies, mate_in_one=mate_in_one)


def chess_ending(board: chess.Board, max_plies: int, adjudicate_material: int = 0) -> tuple[str, str] | None:
    """(result, termination) if a match game is over: the rules, threefold and fifty moves claimed at once,
    and ``max_plies`` a draw. With ``adjudicate_material`` > 0, a game drawn by repetition, fifty moves or
    max plies while a side is that much material ahead is scored as that side's win."""
    outcome = board.outcome()
    if outcome is not None:
        return outcome.result(), outcome.termination.name.lower().replace("_", " ")
    if board.is_repetition(3):
        draw = "threefold repetition"
    elif board.halfmove_clock >= 100:
        draw = "fifty moves"
    elif board.ply() >= max_plies:
        draw = "max plies"
    else:
        return None
    winner = material_winner(board, adjudicate_material)
    if winner:
        return ("1-0" if winner > 0 else "0-1"), f"{ADJUDICATED} ({draw})"
    return "1/2-1/2", draw
