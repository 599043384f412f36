"""One PGN game as training rows, built while python-chess parses it (a visitor: the moves are pushed once,
by the parser). A row is the position before a mainline move, encoded as self-play encodes it (position chain
with repetitions, castling, no-progress counter); its policy is the move played (probability 1) and its value
the game's result for the side to move. Variations are skipped; comments and clocks are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import chess
import chess.pgn
import numpy as np

from ..game.encoding import batch_from_chains, count_repetitions, extend_chain, move_index, position_key

RESULTS = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}
SPEEDS = ("ultrabullet", "bullet", "blitz", "rapid", "classical", "correspondence")
_STANDARD = {"", "standard", "chess", "from position", "normal"}
_TC = re.compile(r"^(\d+)(?:\+(\d+))?$")
MAX_TAG_CHARS = 4096  # of one tag's value: names, events and FENs are far shorter
MAX_PLY = 17_700  # plies: the 75-move rule ends any game before ~17,697 (and the shards store plies as uint16)


def speed_of(time_control: str) -> str:
    """Lichess's speed class of a TimeControl tag: estimated seconds = base + 40 * increment (< 30 ultrabullet,
    < 180 bullet, < 480 blitz, < 1500 rapid, else classical); '-' correspondence; '' when unknown."""
    tc = time_control.strip()
    if tc == "-":
        return "correspondence"
    m = _TC.match(tc)
    if not m:
        return ""
    total = int(m.group(1)) + 40 * int(m.group(2) or 0)
    for limit, name in ((30, "ultrabullet"), (180, "bullet"), (480, "blitz"), (1500, "rapid")):
        if total < limit:
            return name
    return "classical"


@dataclass(frozen=True)
class GameFilter:
    """Which games an import keeps (the reasons others are left out are counted by name)."""

    min_elo: int = 0  # both players rated at least this (a game without both ratings is left out); 0: any
    speeds: tuple[str, ...] = ()  # Lichess speed classes to keep (from TimeControl); empty: any
    ending: str = "result"  # result: any game with a 1-0, 0-1 or 1/2-1/2 result; rules: only games whose last
                            # position ends them by the rules (mate, stalemate, insufficient material, 75 moves,
                            # fivefold repetition) with the result tag agreeing

    def headers_reject(self, headers: dict[str, str]) -> str:
        """Why a game is left out by its tags alone ('' to parse it)."""
        variant = headers.get("Variant", "").strip().lower()
        if variant not in _STANDARD or "960" in variant:
            return "variant"
        if headers.get("Result", "*") not in RESULTS:
            return "no result"
        if self.min_elo:
            try:
                if min(int(headers.get("WhiteElo", "")), int(headers.get("BlackElo", ""))) < self.min_elo:
                    return "rating"
            except ValueError:
                return "rating"
        if self.speeds and speed_of(headers.get("TimeControl", "")) not in self.speeds:
            return "time control"
        return ""


@dataclass
class GameRows:
    """What the visitor made of one game: its rows, or why it was left out (``rejected``) or is malformed."""

    headers: dict[str, str] = field(default_factory=dict)
    rejected: str = ""  # a filter's reason
    malformed: str = ""  # the parser's first error (illegal or ambiguous move, bad FEN, ...)
    chains: list = field(default_factory=list)
    moves: list[int] = field(default_factory=list)  # policy index of the move played, per row
    turns: list[bool] = field(default_factory=list)
    plies: list[int] = field(default_factory=list)
    result: int = 0  # +1 white won, 0 draw, -1 black won
    termination: str = ""

    @property
    def accepted(self) -> bool:
        return not (self.rejected or self.malformed)


class RowVisitor(chess.pgn.BaseVisitor[GameRows]):
    """A python-chess visitor: rows of the mainline while it is parsed. Games the filter leaves out by their tags
    are skipped at python-chess's fast path (their moves are never parsed)."""

    def __init__(self, game_filter: GameFilter, history: int) -> None:
        self.filter = game_filter
        self.history = history
        self.out = GameRows()
        self._link: tuple | None = None
        self._board: chess.Board | None = None
        self._depth = 0
        self._result_token = False  # the movetext ended with its result (a file cut inside a game has none)

    def begin_headers(self) -> chess.pgn.Headers:
        self._tags = chess.pgn.Headers({})  # python-chess sets the game's board up from these
        return self._tags

    def visit_header(self, tagname: str, tagvalue: str) -> None:
        if len(tagvalue) > MAX_TAG_CHARS:  # (NUL bytes and undecodable ones: source.GameText)
            self.handle_error(ValueError(f"tag {tagname[:40]!r} holds a value of {len(tagvalue):,} characters"))
            tagvalue = ""  # not kept: the game is malformed whatever its other tags say
        self.out.headers[tagname] = tagvalue
        self._tags[tagname] = tagvalue

    def end_headers(self):  # noqa: ANN201 - SKIP or None
        self.out.rejected = self.filter.headers_reject(self.out.headers)
        if not self.out.rejected and "Variant" in self._tags:
            del self._tags["Variant"]  # a name of standard chess ('', 'Standard', 'Normal'...) python-chess may not know
        return chess.pgn.SKIP if self.out.rejected else None

    def visit_board(self, board: chess.Board) -> None:
        if self._board is None:
            self._board = board  # the mainline's board: the parser pushes every move onto it
            status = board.status()
            if status != chess.STATUS_VALID:  # a FEN tag python-chess can read but no game can reach
                flags = [name[7:].lower().replace("_", " ") for name in dir(chess) if name.startswith("STATUS_")
                         and name != "STATUS_VALID" and status & getattr(chess, name)]
                self.handle_error(ValueError(f"FEN tag {board.fen()!r} is not a legal position ({', '.join(sorted(flags))})"))

    def visit_result(self, result: str) -> None:
        self._result_token = True

    def begin_variation(self):  # noqa: ANN201
        return chess.pgn.SKIP  # mainline only

    def visit_move(self, board: chess.Board, move: chess.Move) -> None:
        if self.out.malformed:
            return
        if not move:  # a null move ('--', 'Z0'): analysis notation, not a move of a game
            self.handle_error(ValueError(f"null move at ply {board.ply() + 1}"))
            return
        try:
            index = move_index(move, board.turn)
        except ValueError as exc:  # no policy slot for it (the parser has already checked that it is legal)
            self.handle_error(exc)
            return
        if board.halfmove_clock >= 150 or board.ply() >= MAX_PLY:  # the 75-move rule ended the game already
            self.handle_error(ValueError(f"a move at ply {board.ply() + 1}, after "
                                         + ("the 75-move rule ended the game" if board.halfmove_clock >= 150 else
                                            f"ply {MAX_PLY} (longer than any game the rules allow)")))
            return
        key = position_key(board)
        halfmove = board.halfmove_clock
        self._link = extend_chain(key, count_repetitions(key, halfmove, self._link), halfmove, self._link, self.history)
        out = self.out
        out.chains.append(self._link)
        out.moves.append(index)
        out.turns.append(board.turn)
        out.plies.append(board.ply())

    def handle_error(self, error: Exception) -> None:
        if not self.out.malformed:
            self.out.malformed = " ".join(str(error).split())[:200] or type(error).__name__

    def end_game(self) -> None:
        out = self.out
        if not out.accepted:
            return
        board = self._board
        if not self._result_token:
            out.malformed = "its moves end without a result (1-0, 0-1, 1/2-1/2 or *): the file ends inside the game?"
            return
        if board is None or not out.chains:
            out.rejected = "no moves"
            return
        if board.chess960:
            out.rejected = "variant"
            return
        tagged = RESULTS[out.headers.get("Result", "*")]
        ending = rules_ending(board)
        if ending is not None and not ending[2] and tagged != 0:
            ending = None  # a draw that could be claimed, not claimed: the game went on to a resignation or a flag
        if ending is not None:
            name, by_rules, _ = ending
            if by_rules != tagged:
                out.malformed = f"result tag {out.headers.get('Result')} but the game ends by {name}"
                return
            out.termination = name
        elif self.filter.ending == "rules":
            out.rejected = "not ended by the rules"
            return
        else:
            out.termination = "result tag"
        out.result = tagged

    def result(self) -> GameRows:
        return self.out


def rules_ending(board: chess.Board) -> tuple[str, int, bool] | None:
    """(how, result for white, automatic) when the rules end the game in this position (automatic) or let a player
    claim the draw (threefold repetition on the board, fifty moves: not automatic), else None (a resignation, a
    draw agreed, time)."""
    outcome = board.outcome(claim_draw=False)  # mate, stalemate, insufficient material, 75 moves, fivefold
    if outcome is not None:
        winner = 0 if outcome.winner is None else (1 if outcome.winner else -1)
        return outcome.termination.name.lower().replace("_", " "), winner, True
    if board.is_repetition(3):
        return "threefold repetition", 0, False
    if board.halfmove_clock >= 100:
        return "fifty moves", 0, False
    return None


def game_arrays(games: list[GameRows], history: int, first_game_id: int) -> dict[str, np.ndarray]:
    """The shard datasets (docs/shard-format.md) of accepted games, in order; game ids from ``first_game_id``."""
    chains = [c for g in games for c in g.chains]
    positions = batch_from_chains(chains, history)
    n = len(chains)
    values, plies_left, ids = [], [], []
    for k, g in enumerate(games):
        turns = np.array(g.turns, dtype=bool)
        values.append(np.where(turns, g.result, -g.result))
        total = g.plies[0] + len(g.plies)  # the ply after the last move
        plies_left.append(total - np.array(g.plies))
        ids.append(np.full(len(g.plies), first_game_id + k))
    value = np.concatenate(values).astype(np.int8) if games else np.zeros(0, np.int8)
    return {
        "bitboards": positions.bitboards.astype(np.uint64),
        "repetitions": positions.repetitions.astype(np.uint8),
        "turn": positions.turn.astype(np.uint8),
        "castling": positions.castling.astype(np.uint8),
        "halfmove": positions.halfmove.astype(np.uint8),
        "policy_count": np.ones(n, np.uint16),
        # no search: the root value is the result itself, so value_target_q_ratio leaves these rows' targets alone
        "value_target": value,
        "root_value": value.astype(np.float16),
        "plies_left": np.concatenate(plies_left).astype(np.uint16) if games else np.zeros(0, np.uint16),
        "ply": np.array([p for g in games for p in g.plies], dtype=np.uint16),
        "game_id": np.concatenate(ids).astype(np.uint32) if games else np.zeros(0, np.uint32),
        "policy_index": np.array([m for g in games for m in g.moves], dtype=np.uint16),
        "policy_prob": np.ones(n, np.float16),
    }
