"""Attack maps from the rules, as extra input planes: what each side attacks and which pieces hang.

A small network learns slowly that a piece attacked by a pawn, or attacked and not defended, is lost on the
next move; the self-play networks of docs/evaluation-log.md lost most games that way. These planes give it that
from the rules, computed from the same bitboards the other planes are made of (numpy over a whole batch, no
per-position Python): set-wise fills for the sliders (Kogge-Stone), shifts for the rest. Attacks are
pseudo-legal: a pinned piece still attacks, x-rays do not count, en passant is ignored.

Planes (oriented to the side to move, as every plane): squares we attack, squares they attack, our pieces en
prise, theirs en prise. A piece is en prise when the other side attacks it and it is either undefended or
attacked by a piece worth less (pawn 1 < knight = bishop 3 < rook 5 < queen 9 < king); a king is en prise when
it is attacked at all (check).

With ``tactics`` (``model.tactic_planes``) 4 more: our pieces pinned to our king, theirs pinned to theirs (as
``chess.Board.is_pinned``), squares we attack twice or more, squares they do (as ``len(board.attackers(...)) >= 2``:
no x-rays, so a queen behind a bishop counts once). Counted per attacker: each pawn capture side, knight jump
and slider direction reaches a square from at most one piece.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ATTACK_PLANES = 4  # planes per set of maps: attack_maps returns 4 * sets

_U = np.uint64
_FILE_A = _U(0x0101010101010101)
_FILE_B = _U(0x0202020202020202)
_FILE_G = _U(0x4040404040404040)
_FILE_H = _U(0x8080808080808080)
_NOT_A, _NOT_H = ~_FILE_A, ~_FILE_H
_NOT_AB, _NOT_GH = ~(_FILE_A | _FILE_B), ~(_FILE_G | _FILE_H)
_ALL = ~_U(0)
# (shift, mask of the squares a step may land on): positive shifts go up the board (a1 = bit 0)
_ORTHOGONAL = ((8, _ALL), (-8, _ALL), (1, _NOT_A), (-1, _NOT_H))
_DIAGONAL = ((9, _NOT_A), (7, _NOT_H), (-7, _NOT_A), (-9, _NOT_H))


def _shift(b: np.ndarray, s: int) -> np.ndarray:
    return b << _U(s) if s > 0 else b >> _U(-s)


_KNIGHT_JUMPS = ((17, _NOT_A), (15, _NOT_H), (10, _NOT_AB), (6, _NOT_GH),
                 (-6, _NOT_AB), (-10, _NOT_GH), (-15, _NOT_A), (-17, _NOT_H))


def _ray(gen: np.ndarray, empty: np.ndarray, s: int, mask: np.uint64) -> np.ndarray:
    """Squares attacked by the sliders in ``gen`` in one direction, up to and with the first occupied square."""
    pro = empty & mask
    g = gen | (pro & _shift(gen, s))
    pro = pro & _shift(pro, s)
    g |= pro & _shift(g, 2 * s)
    pro = pro & _shift(pro, 2 * s)
    g |= pro & _shift(g, 4 * s)
    return _shift(g, s) & mask


def _union(sets: list[np.ndarray]) -> np.ndarray:
    out = sets[0].copy()
    for a in sets[1:]:
        out |= a
    return out


def _knights(n: np.ndarray) -> np.ndarray:
    one = ((n >> _U(1)) & _NOT_H) | ((n << _U(1)) & _NOT_A)
    two = ((n >> _U(2)) & _NOT_GH) | ((n << _U(2)) & _NOT_AB)
    return (one << _U(16)) | (one >> _U(16)) | (two << _U(8)) | (two >> _U(8))


def _kings(k: np.ndarray) -> np.ndarray:
    row = k | ((k << _U(1)) & _NOT_A) | ((k >> _U(1)) & _NOT_H)
    return (row | (row << _U(8)) | (row >> _U(8))) & ~k


@dataclass
class _Attacks:
    """[2, N] masks per side (0 white, 1 black) of one batch: the side's pieces by kind, the squares it attacks,
    and the attacks by tier (the least valuable attacker's kind: pawn, knight or bishop, rook, queen, king)."""

    p: np.ndarray
    n: np.ndarray
    b: np.ndarray
    r: np.ndarray
    q: np.ndarray
    k: np.ndarray
    pawn: np.ndarray  # squares a pawn of the side attacks
    minor: np.ndarray
    rook: np.ndarray
    queen: np.ndarray
    king: np.ndarray
    attacked: np.ndarray
    captures: list[np.ndarray]  # [2, N] each: the pawns' captures to one side
    diagonal_rays: list[np.ndarray]  # [4, N] each (bishops w/b, queens w/b): one direction's ray
    orthogonal_rays: list[np.ndarray]  # (rooks w/b, queens w/b)
    colour: np.ndarray
    empty: np.ndarray

    @property
    def lesser_than_rook(self) -> np.ndarray:
        return self.pawn | self.minor

    @property
    def lesser_than_queen(self) -> np.ndarray:
        return self.pawn | self.minor | self.rook


def _attacks(bitboards: np.ndarray) -> _Attacks:
    bb = np.asarray(bitboards, dtype=np.uint64)
    pawns, knights, bishops, rooks, queens, kings = (bb[:, i] for i in range(6))
    colour = np.stack([bb[:, 6], bb[:, 7]])  # [2, N]: white, black
    empty = ~(bb[:, 6] | bb[:, 7])
    p, n, b, r, q, k = (colour & x for x in (pawns, knights, bishops, rooks, queens, kings))
    captures = [np.stack([(p[0] << _U(9)) & _NOT_A, (p[1] >> _U(7)) & _NOT_A]),  # [2, N] each: one capture side
                np.stack([(p[0] << _U(7)) & _NOT_H, (p[1] >> _U(9)) & _NOT_H])]
    # [4, N] each (bishops or rooks w/b, queens w/b): one direction's ray, sliders stopped by the first piece met
    bishops_queens, rooks_queens = np.concatenate([b, q]), np.concatenate([r, q])
    diagonal_rays = [_ray(bishops_queens, empty, s, mask) for s, mask in _DIAGONAL]
    orthogonal_rays = [_ray(rooks_queens, empty, s, mask) for s, mask in _ORTHOGONAL]
    diagonal, orthogonal = _union(diagonal_rays), _union(orthogonal_rays)
    pawn, minor, rook = captures[0] | captures[1], _knights(n) | diagonal[:2], orthogonal[:2]
    queen, king = diagonal[2:] | orthogonal[2:], _kings(k)
    return _Attacks(p, n, b, r, q, k, pawn, minor, rook, queen, king, pawn | minor | rook | queen | king,
                    captures, diagonal_rays, orthogonal_rays, colour, empty)


def attack_maps(bitboards: np.ndarray, white_to_move: np.ndarray, sets: int = 1) -> np.ndarray:
    """[N, 4 * sets] uint64 of positions given as [N, 8] bitboards (P, N, B, R, Q, K, white, black), absolute
    orientation: squares attacked by the side to move, by the other side, the side to move's pieces en prise,
    the other side's; with ``sets`` 2 then its pinned pieces, the other side's, the squares it attacks twice or
    more, the other side's. Still absolute: the caller mirrors them with the pieces."""
    a = _attacks(bitboards)
    p, n, b, r, q, k, attacked = a.p, a.n, a.b, a.r, a.q, a.k, a.attacked
    hanging = np.empty_like(attacked)
    for side in (0, 1):
        other = 1 - side
        by, defended = attacked[other], attacked[side]
        hanging[side] = by & (
            (p[side] & ~defended)
            | ((n[side] | b[side]) & (~defended | a.pawn[other]))
            | (r[side] & (~defended | a.lesser_than_rook[other]))
            | (q[side] & (~defended | a.lesser_than_queen[other]))
            | k[side]
        )
    us = np.where(white_to_move, 0, 1)
    idx = np.arange(attacked.shape[1])
    maps = [attacked[us, idx], attacked[1 - us, idx], hanging[us, idx], hanging[1 - us, idx]]
    if sets >= 2:
        # every set holds at most one attacker of a square: one pawn capture side, one knight jump, the king, the
        # nearest slider in one direction (of a bishop and a queen on one line, only the nearer reaches past the other)
        one_each = a.captures + [_shift(n, s) & mask for s, mask in _KNIGHT_JUMPS] + [a.king]
        one_each += [ray[:2] | ray[2:] for ray in a.diagonal_rays + a.orthogonal_rays]
        pinned, twice = _pins(a.colour, a.empty, k, b | q, r | q), _twice(one_each)
        maps += [pinned[us, idx], pinned[1 - us, idx], twice[us, idx], twice[1 - us, idx]]
    return np.stack(maps, axis=1)


PIECE_VALUES = (1, 3, 3, 5, 9)  # pawn, knight, bishop, rook, queen: the material a capture wins, in pawns


def _best_capture(a: _Attacks, side: int) -> tuple[np.ndarray, np.ndarray]:
    """([N] the most material ``side`` wins with one capture and the other side's best recapture, [N] the squares of
    the pieces that win it): a piece the other side does not defend is won whole, a defended one for its value less
    the cheapest attacker's (when positive)."""
    other = 1 - side
    defended = a.attacked[other]
    tiers = ((a.pawn[side], 1), (a.minor[side], 3), (a.rook[side], 5), (a.queen[side], 9))
    gain = np.zeros(defended.shape, np.float32)
    target = np.zeros_like(defended)
    for pieces, value in zip((a.p[other], a.n[other], a.b[other], a.r[other], a.q[other]), PIECE_VALUES):
        for hit, won in [(pieces & a.attacked[side] & ~defended, value)] + [
                (pieces & defended & attackers, value - cost) for attackers, cost in tiers if cost < value]:
            g = np.where(hit != 0, np.float32(won), np.float32(0))
            target = np.where(g > gain, hit, np.where((g == gain) & (g > 0), target | hit, target))
            gain = np.maximum(gain, g)
    return gain, target


def _lowest_bit(x: np.ndarray) -> np.ndarray:
    return x & (_U(0) - x)


def _cheapest_attacker(a: _Attacks, side: int, square: np.ndarray) -> np.ndarray:
    """[N] one of ``side``'s least valuable pieces that attack ``square`` ([N] one bit each, or 0), or 0."""
    if side == 0:
        pawns = ((square & _NOT_A) >> _U(9)) | ((square & _NOT_H) >> _U(7))
    else:
        pawns = ((square & _NOT_A) << _U(7)) | ((square & _NOT_H) << _U(9))
    diagonal = _union([_ray(square, a.empty, s, mask) for s, mask in _DIAGONAL])
    orthogonal = _union([_ray(square, a.empty, s, mask) for s, mask in _ORTHOGONAL])
    tiers = (pawns & a.p[side], (_knights(square) & a.n[side]) | (diagonal & a.b[side]), orthogonal & a.r[side],
             (diagonal | orthogonal) & a.q[side], _kings(square) & a.k[side])
    out = np.zeros_like(square)
    for tier in reversed(tiers):  # the cheapest tier that has one is the last written
        out = np.where(tier != 0, tier, out)
    return _lowest_bit(out)


def capture_gain(bitboards: np.ndarray, white_to_move: np.ndarray) -> np.ndarray:
    """[N] float32 pawns of material the side to move can win now, for positions given as [N, 8] bitboards
    (``attack_maps``' layout). Its best single capture (``_best_capture``) is made on the board, by its cheapest
    attacker; the gain is the captured piece's value less the other side's best capture in the position after it
    (its recapture, or another piece of ours it attacks: not the threats of the piece just taken, nor against the
    piece that moved away), and never below 0 (the side to move may keep what it has); 0 when it is in check.
    A static estimate from the rules: no x-rays, pins, en passant or promotions, one capture and one reply deep."""
    bb = np.asarray(bitboards, dtype=np.uint64)
    a = _attacks(bb)
    us = np.where(np.asarray(white_to_move, bool), 0, 1)
    idx = np.arange(bb.shape[0])
    target = np.stack([_best_capture(a, 0)[1], _best_capture(a, 1)[1]])[us, idx]
    square = _lowest_bit(target)
    mover = np.where(us == 0, _cheapest_attacker(a, 0, square), _cheapest_attacker(a, 1, square))
    won = np.zeros(len(bb), np.float32)
    after = bb.copy()
    for kind, value in enumerate(PIECE_VALUES + (0,)):
        won += np.where((bb[:, kind] & square) != 0, np.float32(value), np.float32(0))
        moved = np.where((bb[:, kind] & mover) != 0, square, _U(0))
        after[:, kind] = (bb[:, kind] & ~square & ~mover) | moved
    ours, theirs = np.where(us == 0, 6, 7), np.where(us == 0, 7, 6)
    after[idx, ours] = (bb[idx, ours] & ~mover) | square
    after[idx, theirs] = bb[idx, theirs] & ~square
    a2 = _attacks(after)
    reply = np.stack([_best_capture(a2, 0)[0], _best_capture(a2, 1)[0]])[1 - us, idx]
    in_check = (a.k[us, idx] & a.attacked[1 - us, idx]) != 0
    return np.where(in_check | (square == 0), 0.0, np.maximum(won - reply, 0.0)).astype(np.float32)


def _twice(attacker_sets: list[np.ndarray]) -> np.ndarray:
    """[2, N] squares each side attacks with two pieces or more, from sets that each hold at most one attacker of a
    square: a square in two of them is attacked twice."""
    once, twice = np.zeros_like(attacker_sets[0]), np.zeros_like(attacker_sets[0])
    for a in attacker_sets:
        twice |= once & a
        once |= a
    return twice


def _pins(colour: np.ndarray, empty: np.ndarray, k: np.ndarray, diagonal: np.ndarray,
          orthogonal: np.ndarray) -> np.ndarray:
    """[2, N] each side's pieces pinned to its own king by the other side's sliders: looking out from the king in
    each direction, the first piece met is its own and the next one an enemy slider that moves that way."""
    pinned = np.zeros_like(k)
    for sliders, directions in ((diagonal, _DIAGONAL), (orthogonal, _ORTHOGONAL)):
        enemy = sliders[::-1]  # [2, N]: the sliders that pin white's pieces are black's, and the other way round
        for s, mask in directions:
            blocker = _ray(k, empty, s, mask) & colour
            pinned |= np.where((_ray(blocker, empty, s, mask) & enemy) != 0, blocker, _U(0))
    return pinned
