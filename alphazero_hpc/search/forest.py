"""Every tree of a process in one ``Forest`` of flat numpy arrays.

One selection step for every tree is then a handful of numpy operations over a [trees, children] matrix
(``puct``). Per-node Python work is only what python-chess must do: copy the parent board, push the move,
generate legal moves and test for the end of the game (``game.rules``).

Values are from the side to move at the node: ``node_w / node_n`` is the mean value for the player who
moves there; a child's value for its parent is the negation.
"""

from __future__ import annotations

import math
from typing import Sequence

import chess
import numpy as np

from ..arrays import ragged_ranges
from ..game.encoding import chain_for_board, count_repetitions, extend_chain, move_indices
from ..game.rules import Rules


class _Grow:
    """A growable 1-D numpy array (amortised doubling)."""

    __slots__ = ("a", "n")

    def __init__(self, dtype: type, fill: float | int = 0, cap: int = 1024) -> None:
        self.a = np.full(cap, fill, dtype=dtype)
        self.n = 0

    def reserve(self, k: int, fill: float | int) -> int:
        start = self.n
        need = start + k
        if need > len(self.a):
            cap = max(need, 2 * len(self.a))
            b = np.full(cap, fill, dtype=self.a.dtype)
            b[:start] = self.a[:start]
            self.a = b
        else:
            self.a[start:need] = fill  # slots may hold values from before a compaction
        self.n = need
        return start


class Forest:
    """Nodes and edges of many trees in flat arrays. Node ids and edge ids are ints into the arrays.

    Nodes: visits ``n``, value sum ``w``, first edge and edge count (-1 until expanded), terminal value
    (NaN if not terminal), and in Python lists the board and the position chain used for repetition and
    history planes. Edges: prior, child node (-1 until visited) and the chess.Move.
    """

    def __init__(self, rules: Rules, history: int) -> None:
        self.rules = rules
        self.history = history
        self._n = _Grow(np.float32)
        self._w = _Grow(np.float32)
        self._estart = _Grow(np.int64)
        self._ecount = _Grow(np.int32, -1)
        self._term = _Grow(np.float32, np.nan)
        self._v = _Grow(np.float32)  # the network's value of the node (side to move), once evaluated
        self._prior = _Grow(np.float32)
        self._child = _Grow(np.int64, -1)
        self.board: list[chess.Board] = []
        self.chain: list[tuple] = []
        self.legal: list[list[chess.Move] | None] = []
        self.edge_move: list[chess.Move] = []

    # -- views --------------------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self._n.n

    @property
    def num_edges(self) -> int:
        return self._prior.n

    def node_n(self) -> np.ndarray:
        return self._n.a

    def node_w(self) -> np.ndarray:
        return self._w.a

    def children(self, node: int) -> tuple[np.ndarray, np.ndarray, list[chess.Move]]:
        """(edge priors, child visit counts, moves) of an expanded node."""
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        ch = self._child.a[s : s + c]
        visits = np.where(ch >= 0, self._n.a[np.maximum(ch, 0)], 0).astype(np.float32)
        return self._prior.a[s : s + c].copy(), visits, self.edge_move[s : s + c]

    def child_of(self, node: int, k: int) -> int:
        return int(self._child.a[self._estart.a[node] + k])

    def edge_count(self, node: int) -> int:
        """Edges (legal moves) of an expanded node; -1 before its expansion."""
        return int(self._ecount.a[node])

    def is_expanded(self, node: int) -> bool:
        return bool(self._ecount.a[node] >= 0)

    def terminal_value(self, node: int) -> float | None:
        v = self._term.a[node]
        return None if math.isnan(v) else float(v)

    def raw_value(self, node: int) -> float:
        """The network's value of an evaluated node for its side to move (its terminal value if it ends the game)."""
        term = self._term.a[node]
        return float(self._v.a[node] if math.isnan(term) else term)

    def child_q(self, node: int) -> np.ndarray:
        """[A] mean value of each child for the side to move at ``node`` (0 where unvisited)."""
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        ch = self._child.a[s : s + c]
        safe = np.maximum(ch, 0)
        n = self._n.a[safe]
        return np.where((ch >= 0) & (n > 0), -self._w.a[safe] / np.maximum(n, 1.0), 0.0).astype(np.float32)

    def q(self, node: int) -> float:
        n = self._n.a[node]
        return float(self._w.a[node] / n) if n > 0 else 0.0

    # -- building -----------------------------------------------------------------------------------------
    def new_node(self, board: chess.Board, parent_chain: tuple | None) -> int:
        """Add one node for ``board`` (the forest owns the board from now on); see ``add_nodes``."""
        return self.add_nodes([board], [parent_chain])[0]

    def new_root(self, board: chess.Board) -> int:
        """A node for a game's current position, its history read from ``board``'s move stack. A position
        these rules end but the game does not (a repetition or move count nobody claimed) is searched anyway."""
        parent = None
        if board.move_stack:
            before = board.copy()
            before.pop()
            parent = chain_for_board(before, self.history)
        root = self.new_node(board.copy(stack=False), parent)
        if self.terminal_value(root) is not None and not board.is_game_over():
            self._term.a[root] = np.nan
            self.legal[root] = list(board.legal_moves)
        return root

    def add_nodes(self, boards: Sequence[chess.Board], parent_chains: Sequence[tuple | None]) -> list[int]:
        """Add a node per board and decide which ones end the game (the python-chess hot path)."""
        rules, history = self.rules, self.history
        k = len(boards)
        first = self._n.reserve(k, 0)
        self._w.reserve(k, 0)
        self._estart.reserve(k, 0)
        self._ecount.reserve(k, -1)
        self._term.reserve(k, np.nan)
        self._v.reserve(k, 0)
        terms = []
        chains, legal_out = self.chain, self.legal
        end_value = rules.end_value
        for board, parent in zip(boards, parent_chains):
            occ = board.occupied_co
            key = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                   occ[1], occ[0], board.turn, board.castling_rights, board.ep_square)
            hm = board.halfmove_clock
            reps = count_repetitions(key, hm, parent) if hm >= 4 else 0
            chains.append(extend_chain(key, reps, hm, parent, history))
            term, legal = end_value(board, reps)
            terms.append(term)
            legal_out.append(legal)
        self.board.extend(boards)
        self._term.a[first : first + k] = terms
        return list(range(first, first + k))

    def expand(self, nodes: Sequence[int], logits: np.ndarray, values: np.ndarray | None = None) -> None:
        """Give ``nodes`` their edges with priors = softmax of ``logits`` [len(nodes), 4672] over legal moves, and
        remember the network's ``values`` [len(nodes)] of them (Gumbel's completed Q-values need it)."""
        counts = np.empty(len(nodes), dtype=np.int64)
        flat_idx: list[int] = []
        for i, node in enumerate(nodes):
            moves = self.legal[node]
            assert moves is not None, "expand() of a terminal node"
            idx = move_indices(moves, self.board[node].turn)
            flat_idx.extend(idx)
            counts[i] = len(idx)
            self.edge_move.extend(moves)
            self.legal[node] = None
        rows = np.repeat(np.arange(len(nodes)), counts)
        vals = logits[rows, np.asarray(flat_idx, dtype=np.int64)].astype(np.float32)
        seg = np.concatenate(([0], np.cumsum(counts)[:-1]))
        vals -= np.repeat(np.maximum.reduceat(vals, seg), counts)
        np.exp(vals, out=vals)
        vals /= np.repeat(np.add.reduceat(vals, seg), counts)
        start = self._prior.reserve(len(vals), 0)
        self._child.reserve(len(vals), -1)
        self._prior.a[start : start + len(vals)] = vals
        nodes_a = np.asarray(nodes, dtype=np.int64)
        self._estart.a[nodes_a] = start + seg
        self._ecount.a[nodes_a] = counts
        if values is not None:
            self._v.a[nodes_a] = values

    def add_noise(self, node: int, noise: np.ndarray, epsilon: float) -> None:
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        p = self._prior.a[s : s + c]
        p[:] = (1.0 - epsilon) * p + epsilon * noise

    # -- housekeeping -------------------------------------------------------------------------------------
    def compact(self, roots: Sequence[int]) -> np.ndarray:
        """Drop every node not reachable from ``roots``. Returns the map old id -> new id (-1: dropped;
        index -1 maps to -1). Vectorised BFS."""
        keep_levels = []
        frontier = np.asarray(roots, dtype=np.int64)
        estart, ecount, child = self._estart.a, self._ecount.a, self._child.a
        while frontier.size:
            keep_levels.append(frontier)
            cnt = np.maximum(ecount[frontier], 0)
            e = ragged_ranges(estart[frontier], cnt)
            ch = child[e]
            frontier = ch[ch >= 0]
        keep = np.concatenate(keep_levels) if keep_levels else np.empty(0, dtype=np.int64)
        new_id = np.full(self.num_nodes + 1, -1, dtype=np.int64)  # +1 so that child -1 maps to -1
        new_id[keep] = np.arange(len(keep))
        cnt = np.maximum(ecount[keep], 0)
        old_edges = ragged_ranges(estart[keep], cnt)
        new_start = np.concatenate(([0], np.cumsum(cnt)[:-1])).astype(np.int64)

        def gather(g: _Grow, idx: np.ndarray, fill: float | int) -> None:
            vals = g.a[idx].copy()
            g.n = 0
            g.reserve(len(vals), fill)
            g.a[: len(vals)] = vals

        gather(self._n, keep, 0)
        gather(self._w, keep, 0)
        gather(self._term, keep, np.nan)
        gather(self._v, keep, 0)
        gather(self._ecount, keep, -1)
        self._estart.n = 0
        self._estart.reserve(len(keep), 0)
        self._estart.a[: len(keep)] = new_start
        gather(self._prior, old_edges, 0)
        old_child = child[old_edges]
        self._child.n = 0
        self._child.reserve(len(old_edges), -1)
        self._child.a[: len(old_edges)] = new_id[old_child]
        keep_l = keep.tolist()
        self.board = [self.board[i] for i in keep_l]
        self.chain = [self.chain[i] for i in keep_l]
        self.legal = [self.legal[i] for i in keep_l]
        self.edge_move = [self.edge_move[i] for i in old_edges.tolist()]
        return new_id
