"""Chess encoding: the AlphaZero 8x8x73 move index and the input planes. Pure numpy, never torch.

Everything is oriented to the side to move: for black, squares are mirrored vertically (``sq ^ 56``),
which for a bitboard is a byteswap. See ``docs/encoding.md`` for the layout.

Moves
    index = plane * 64 + from_square (oriented), 4672 = 73 * 64 in all, the layout a 1x1 convolution with
    73 output channels produces when flattened. Planes 0..55 are queen-like moves (direction * 7 +
    distance - 1, directions N, NE, E, SE, S, SW, W, NW), 56..63 knight moves, 64..72 under-promotions
    (64 + 3 * direction + piece, directions capture-left, straight, capture-right, pieces N, B, R).
    Queen promotions use the queen-like planes.

Planes
    Per history step t = 0 (now) .. H-1: 6 planes of our pieces (P N B R Q K), 6 of theirs, then
    "occurred before at least once" and "at least twice". Then: colour (ones when black is to move),
    castling rights (ours king side, ours queen side, theirs king side, theirs queen side), the
    no-progress counter / 100, and a plane of ones. ``num_planes(H) = 14 * H + 7``. With ``attacks``
    (``model.attack_planes``) 4 more at the end, from the position now: squares we attack, squares they
    attack, our pieces en prise, theirs (``game.attacks``). ``attacks`` counts sets of 4 maps: 2
    (``model.tactic_planes`` too) adds our pinned pieces, theirs, the squares we attack twice or more, theirs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Sequence

import chess
import numpy as np

from .attacks import ATTACK_PLANES, attack_maps

NUM_MOVES = 4672
MOVE_PLANES = 73
PLANES_PER_STEP = 14
CONSTANT_PLANES = 7
PAD_INDEX = NUM_MOVES  # pads sparse policy rows: out of range, never a real move

Bitboard = int
Key = tuple  # (P, N, B, R, Q, K, white, black, turn, castling_rights, ep_square)

_QUEEN_DIRS = [(0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1)]  # (file, rank) steps
_KNIGHT_DELTAS = [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)]
_UNDER_PIECES = {chess.KNIGHT: 0, chess.BISHOP: 1, chess.ROOK: 2}


def num_planes(history: int, attacks: int = 0) -> int:
    """Input planes of a network with ``history`` steps and ``attacks`` sets of attack maps (0, 1 or 2; a bool
    reads as 0 or 1: ``ModelConfig.attack_sets``)."""
    return PLANES_PER_STEP * history + CONSTANT_PLANES + ATTACK_PLANES * int(attacks)


def _build_tables() -> tuple[list[int], list[int], np.ndarray]:
    """Index of every (from, to) queen/knight move, and of under-promotions by (from, to, piece)."""
    table = [-1] * (64 * 64)
    under = [-1] * (64 * 64 * 3)
    inverse = np.full((NUM_MOVES, 3), -1, dtype=np.int16)  # index -> (from, to, promotion kind)
    for sq in range(64):
        f, r = sq & 7, sq >> 3
        for d, (df, dr) in enumerate(_QUEEN_DIRS):
            for dist in range(1, 8):
                tf, tr = f + df * dist, r + dr * dist
                if 0 <= tf < 8 and 0 <= tr < 8:
                    idx = (d * 7 + dist - 1) * 64 + sq
                    table[sq * 64 + tr * 8 + tf] = idx
                    inverse[idx] = (sq, tr * 8 + tf, 0)
        for k, (df, dr) in enumerate(_KNIGHT_DELTAS):
            tf, tr = f + df, r + dr
            if 0 <= tf < 8 and 0 <= tr < 8:
                idx = (56 + k) * 64 + sq
                table[sq * 64 + tr * 8 + tf] = idx
                inverse[idx] = (sq, tr * 8 + tf, 0)
        if r == 6:
            for d, df in enumerate((-1, 0, 1)):
                tf = f + df
                if 0 <= tf < 8:
                    for piece, p in _UNDER_PIECES.items():
                        idx = (64 + 3 * d + p) * 64 + sq
                        under[(sq * 64 + 56 + tf) * 3 + p] = idx
                        inverse[idx] = (sq, 56 + tf, piece)
    return table, under, inverse


_TABLE, _UNDER, _INVERSE = _build_tables()


def move_index(move: chess.Move, turn: chess.Color) -> int:
    """The policy index of ``move`` for the side ``turn``."""
    flip = 0 if turn else 56
    f, t = move.from_square ^ flip, move.to_square ^ flip
    p = move.promotion
    if p is None or p == chess.QUEEN:
        idx = _TABLE[f * 64 + t]
    else:
        idx = _UNDER[(f * 64 + t) * 3 + _UNDER_PIECES[p]]
    if idx < 0:
        raise ValueError(f"move {move.uci()} has no AlphaZero index")
    return idx


def move_indices(moves: Sequence[chess.Move], turn: chess.Color) -> list[int]:
    """Policy indices of ``moves`` (all legal in one position). About 0.1 us per move: the hot path."""
    flip = 0 if turn else 56
    table, under = _TABLE, _UNDER
    out: list[int] = []
    append = out.append
    for m in moves:
        p = m.promotion
        if p is None or p == 5:  # chess.QUEEN
            append(table[((m.from_square ^ flip) << 6) | (m.to_square ^ flip)])
        else:
            append(under[((((m.from_square ^ flip) << 6) | (m.to_square ^ flip)) * 3) + _UNDER_PIECES[p]])
    return out


def index_to_move(board: chess.Board, index: int) -> chess.Move:
    """The move of ``board``'s side to move that ``index`` encodes (queen promotion implied for pawns)."""
    if not 0 <= index < NUM_MOVES:
        raise ValueError(f"move index {index} out of range 0..{NUM_MOVES - 1}")
    f, t, piece = (int(x) for x in _INVERSE[index])
    if f < 0:
        raise ValueError(f"move index {index} encodes no move")
    flip = 0 if board.turn else 56
    frm, to = f ^ flip, t ^ flip
    promotion = piece or None
    if promotion is None and board.piece_type_at(frm) == chess.PAWN and chess.square_rank(to) in (0, 7):
        promotion = chess.QUEEN
    return chess.Move(frm, to, promotion)


def legal_mask(board: chess.Board) -> np.ndarray:
    """Boolean [4672] mask of the legal moves of ``board``."""
    mask = np.zeros(NUM_MOVES, dtype=bool)
    mask[move_indices(list(board.legal_moves), board.turn)] = True
    return mask


def position_key(board: chess.Board) -> Key:
    """Bitboards and state that identify a position for repetition; the first 8 entries feed the planes.

    What python-chess compares for repetitions: castling rights as ``clean_castling_rights`` and the en-passant
    square only when an en-passant capture is legal (a double pawn push that allows none can be repeated later).
    The compiled ``Position.key`` returns the same tuple.
    """
    occ = board.occupied_co
    return (
        board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
        occ[chess.WHITE], occ[chess.BLACK], board.turn, board.clean_castling_rights(),
        board.ep_square if board.has_legal_en_passant() else None,
    )


def castling_flags(board: chess.Board) -> int:
    """Castling rights as 4 bits: 1 white king side, 2 white queen side, 4 black king side, 8 black queen side."""
    cr = board.castling_rights
    return (
        (1 if cr & chess.BB_H1 else 0) | (2 if cr & chess.BB_A1 else 0)
        | (4 if cr & chess.BB_H8 else 0) | (8 if cr & chess.BB_A8 else 0)
    )


def castling_flags_array(rights: np.ndarray) -> np.ndarray:
    """Vectorised ``castling_flags`` over raw python-chess castling-rights bitboards [N] uint64."""
    r = rights.astype(np.uint64)
    one = np.uint64(1)
    return (
        ((r >> np.uint64(7)) & one) | (((r >> np.uint64(0)) & one) << one)
        | (((r >> np.uint64(63)) & one) << np.uint64(2)) | (((r >> np.uint64(56)) & one) << np.uint64(3))
    ).astype(np.uint8)


@dataclass
class PositionBatch:
    """The compact form of N positions that planes are made from (also what a shard row stores).

    bitboards:   [N, H, 8] uint64, per history step (P, N, B, R, Q, K, white, black), absolute
                 orientation; all zero where the game had no position yet.
    repetitions: [N, H] uint8, earlier occurrences of that step's position (capped at 2).
    turn:        [N] bool, True when white is to move now.
    castling:    [N] uint8, ``castling_flags``.
    halfmove:    [N] uint8, the no-progress counter (capped at 255).
    """

    bitboards: np.ndarray
    repetitions: np.ndarray
    turn: np.ndarray
    castling: np.ndarray
    halfmove: np.ndarray

    def __len__(self) -> int:
        return int(self.bitboards.shape[0])


# A position chain is a persistent linked list, one link per position of a game or search path:
#   (key, repetitions, halfmove, parent_link, history_bytes, repetition_bytes)
# history_bytes packs the 8 bitboards of the last H positions (newest first, little-endian uint64), so a
# batch of H-step histories is one bytes.join and one np.frombuffer; repetition_bytes holds their counts.
CHAIN_KEY, CHAIN_REPS, CHAIN_HALFMOVE, CHAIN_PARENT, CHAIN_HISTORY, CHAIN_REPHIST = range(6)
_PACK8 = struct.Struct("<8Q").pack


def extend_chain(key: Key, reps: int, halfmove: int, parent: tuple | None, history: int) -> tuple:
    """The chain link of a position whose predecessor's link is ``parent``."""
    own = _PACK8(*key[:8])
    rep = bytes((min(reps, 2),))
    if parent is None:
        hist = own + bytes(64 * (history - 1))
        rh = rep + bytes(history - 1)
    else:
        hist = own + parent[CHAIN_HISTORY][: 64 * (history - 1)]
        rh = rep + parent[CHAIN_REPHIST][: history - 1]
    return (key, reps, halfmove, parent, hist, rh)


def count_repetitions(key: Key, halfmove: int, parent: tuple | None) -> int:
    """Earlier occurrences of ``key`` since the last irreversible move (same side to move only)."""
    reps = 0
    if halfmove >= 4 and parent is not None:
        link = parent[CHAIN_PARENT]
        steps = halfmove // 2
        while link is not None and steps:
            if link[CHAIN_KEY] == key:
                reps += 1
            grand = link[CHAIN_PARENT]
            link = grand[CHAIN_PARENT] if grand is not None else None
            steps -= 1
    return reps


def batch_from_chains(chains: Sequence[tuple], history: int) -> PositionBatch:
    """Gather a PositionBatch from chain links built with the same ``history``."""
    n = len(chains)
    # an empty batch (a game none of whose moves was searched fully) has no length to infer -1 from
    bb = np.frombuffer(b"".join([c[CHAIN_HISTORY] for c in chains]), dtype="<u8").reshape(n, -1 if n else history, 8)
    if bb.shape[1] != history:
        raise ValueError(f"chains carry {bb.shape[1]} history steps, {history} asked")
    reps = np.frombuffer(b"".join([c[CHAIN_REPHIST] for c in chains]), dtype=np.uint8).reshape(n, history)
    keys = [c[CHAIN_KEY] for c in chains]
    return PositionBatch(
        bitboards=bb.astype(np.uint64),
        repetitions=reps.copy(),
        turn=np.fromiter((k[8] for k in keys), dtype=bool, count=n),
        castling=castling_flags_array(np.fromiter((k[9] for k in keys), dtype=np.uint64, count=n)),
        halfmove=np.fromiter((min(c[CHAIN_HALFMOVE], 255) for c in chains), dtype=np.uint8, count=n),
    )


def chain_for_board(board: chess.Board, history: int) -> tuple:
    """Chain link of ``board`` including its move stack's history (for a game's first root, UCI, tests)."""
    replay = board.root()
    positions = [replay.copy(stack=False)]
    for move in board.move_stack:
        replay.push(move)
        positions.append(replay.copy(stack=False))
    link: tuple | None = None
    for b in positions:
        key = position_key(b)
        link = extend_chain(key, count_repetitions(key, b.halfmove_clock, link), b.halfmove_clock, link, history)
    assert link is not None  # positions holds at least the root
    return link


def encode_batch(batch: PositionBatch, out: np.ndarray | None = None, attacks: int = 0) -> np.ndarray:
    """Input planes float32 [N, num_planes(H, attacks), 8, 8] of a PositionBatch. About 2 us per position at
    H=8; the first set of attack maps adds about 3.5 us at a batch of 64."""
    n, h, _ = batch.bitboards.shape
    c = num_planes(h, attacks)
    if out is None:
        out = np.empty((n, c, 8, 8), dtype=np.float32)
    bb = batch.bitboards
    white = batch.turn
    us_occ = np.where(white[:, None], bb[:, :, 6], bb[:, :, 7])  # [N, H]
    them_occ = np.where(white[:, None], bb[:, :, 7], bb[:, :, 6])
    pieces = np.empty((n, h, 12), dtype=np.uint64)
    pieces[:, :, :6] = bb[:, :, :6] & us_occ[:, :, None]
    pieces[:, :, 6:] = bb[:, :, :6] & them_occ[:, :, None]
    extra = ATTACK_PLANES * int(attacks)
    maps = attack_maps(bb[:, 0], white, int(attacks)) if attacks else None
    black = ~white
    if black.any():
        pieces[black] = pieces[black].byteswap()  # mirror ranks: black's view becomes "from the bottom"
        if maps is not None:
            maps[black] = maps[black].byteswap()
    if maps is not None:
        out[:, c - extra:] = np.unpackbits(maps.view(np.uint8), bitorder="little").reshape(n, extra, 8, 8)
    bits = np.unpackbits(pieces.view(np.uint8), bitorder="little").reshape(n, h, 12, 8, 8)
    steps = out[:, : PLANES_PER_STEP * h].reshape(n, h, PLANES_PER_STEP, 8, 8)
    steps[:, :, :12] = bits
    reps = batch.repetitions
    steps[:, :, 12] = (reps >= 1)[:, :, None, None]
    steps[:, :, 13] = (reps >= 2)[:, :, None, None]
    tail = out[:, PLANES_PER_STEP * h:]
    flags = batch.castling.astype(np.int32)
    ours = np.where(white, flags & 3, (flags >> 2) & 3)
    theirs = np.where(white, (flags >> 2) & 3, flags & 3)
    tail[:, 0] = black[:, None, None]
    tail[:, 1] = (ours & 1)[:, None, None]
    tail[:, 2] = ((ours >> 1) & 1)[:, None, None]
    tail[:, 3] = (theirs & 1)[:, None, None]
    tail[:, 4] = ((theirs >> 1) & 1)[:, None, None]
    tail[:, 5] = (batch.halfmove.astype(np.float32) / 100.0)[:, None, None]
    tail[:, 6] = 1.0
    return out


def encode_boards(boards: Iterable[chess.Board], history: int, attacks: int = 0) -> np.ndarray:
    """Planes of whole boards with their move stacks (convenient, slow: for tests, UCI and evaluation)."""
    return encode_batch(batch_from_chains([chain_for_board(b, history) for b in boards], history), attacks=attacks)
