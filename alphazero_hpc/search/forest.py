"""Every tree of a process in one ``Forest`` of flat numpy arrays.

One selection step for every tree is then a handful of numpy operations over a [trees, children] matrix
(``puct``). Per-node Python work is one call each into the compiled position (``game.position``): push the move,
test for the end of the game (``game.rules``) and, for a node visited again, generate its legal moves. Moves are
ints (``from | to << 6 | promotion << 12``) until ``children`` hands them out as ``chess.Move``.

Expansion can be lazy (``lazy_rows`` > 0, mcts.lazy_rows): an evaluated node keeps its network logits (a row of a
bounded pool) and gets its edges only when a walk goes through it; most leaves are visited once and never pay for
their edges. The priors are the same softmax of the same float32 logits either way, so the search is unchanged.
When the pool is full, nodes are expanded at once, as without it. Since moves are compiled this pays only where
most evaluated nodes are never visited again (Gumbel's root; docs/performance.md).

Values are from the side to move at the node: ``node_w / node_n`` is the mean value for the player who
moves there; a child's value for its parent is the negation.
"""

from __future__ import annotations

import math
from typing import Sequence

import chess
import numpy as np

from ..arrays import ragged_ranges
from ..game.encoding import NUM_MOVES, chain_for_board, count_repetitions, extend_chain
from ..game.position import (FLIP_MOVE, POLICY_INDEX, ChessPosition, SearchPosition, require_compiled, search_position,
                             to_move)
from ..game.rules import PROVEN_WIN, Rules


class _Grow:
    """A growable 1-D numpy array (amortised doubling)."""

    __slots__ = ("a", "n")

    def __init__(self, dtype: type, fill: float | int = 0, cap: int = 1024) -> None:
        self.a: np.ndarray = np.full(cap, fill, dtype=dtype)
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
    (NaN if not terminal), and in Python lists the position and the position chain used for repetition and
    history planes. Edges: prior, child node (-1 until visited) and the move (an int).
    """

    def __init__(self, rules: Rules, history: int, lazy_rows: int = 0, move_generator: str = "compiled",
                 policy_temperature: float = 1.0) -> None:
        self.rules = rules
        self.policy_temperature = policy_temperature  # priors = softmax(logits / T) (mcts.policy_temperature)
        # roots become compiled positions, or python-chess's behind the same interface (the reference)
        if move_generator == "compiled":
            require_compiled()
        self._position = search_position if move_generator == "compiled" else ChessPosition.of
        self.history = history
        self.lazy_rows = lazy_rows  # at most this many logits rows kept (18.7 KB each); 0: expand at once
        self._slot = _Grow(np.int32, -1)  # pool row of an evaluated node not yet expanded, else -1
        # np.empty reserves address space; the memory of a row is taken when the row is first written.
        self._pool = np.empty((lazy_rows, NUM_MOVES), dtype=np.float32)
        self._free: list[int] = list(range(lazy_rows - 1, -1, -1))
        self._n = _Grow(np.float32)
        self._w = _Grow(np.float32)
        self._estart = _Grow(np.int64)
        self._ecount = _Grow(np.int32, -1)
        self._term = _Grow(np.float32, np.nan)
        self._v = _Grow(np.float32)  # the network's value of the node (side to move), once evaluated
        self._prior = _Grow(np.float32)
        self._child = _Grow(np.int64, -1)
        self._move = _Grow(np.int32)  # each edge's move
        self.pos: list[SearchPosition] = []
        self.chain: list[tuple] = []

    # -- the arrays, named for what they hold (views of the current storage: re-read them after nodes or
    # edges are added, which may move it). Node arrays are [num_nodes], edge arrays [num_edges]. -------------
    @property
    def node_visits(self) -> np.ndarray:
        """float32: visits of each node (its parent edge's N)."""
        return self._n.a

    @property
    def node_value_sum(self) -> np.ndarray:
        """float32: sum of the values backed up through each node, from the view of the player who moved into it."""
        return self._w.a

    @property
    def node_first_edge(self) -> np.ndarray:
        """int64: index of each node's first edge (its edges are contiguous)."""
        return self._estart.a

    @property
    def node_edge_count(self) -> np.ndarray:
        """int32: number of edges of each node; -1 until the node is expanded."""
        return self._ecount.a

    @property
    def node_terminal_value(self) -> np.ndarray:
        """float32: the game's result from the side to move for a finished node, NaN otherwise."""
        return self._term.a

    @property
    def node_network_value(self) -> np.ndarray:
        """float32: the network's value of each node (side to move), once evaluated."""
        return self._v.a

    @property
    def node_lazy_row(self) -> np.ndarray:
        """int32: the logits pool row of an evaluated node not yet expanded (``lazy_rows``), else -1."""
        return self._slot.a

    @property
    def edge_prior(self) -> np.ndarray:
        """float32: each edge's prior probability."""
        return self._prior.a

    @property
    def edge_child(self) -> np.ndarray:
        """int64: the node an edge leads to; -1 until the edge is first visited."""
        return self._child.a

    @property
    def edge_move(self) -> np.ndarray:
        """int32: each edge's move (``from | to << 6 | promotion << 12``)."""
        return self._move.a

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

    @property
    def pending_rows(self) -> int:
        """Evaluated nodes whose expansion waits for their next visit."""
        return int((self._slot.a[: self.num_nodes] >= 0).sum())

    def _ready(self, node: int) -> None:
        if self._slot.a[node] >= 0:
            self.expand_pending([node])

    def children(self, node: int) -> tuple[np.ndarray, np.ndarray, list[chess.Move]]:
        """(edge priors, child visit counts, moves) of an evaluated node."""
        priors, visits = self.priors_and_visits(node)
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        return priors, visits, [to_move(m) for m in self._move.a[s : s + c].tolist()]

    def priors_and_visits(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """``children`` without the moves: a Gumbel root's choice before every simulation reads only these, and
        making its ~30 ``chess.Move`` objects each time was ~8% of int8 self-play's wall clock (docs/performance.md)."""
        self._ready(node)
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        ch = self._child.a[s : s + c]
        visits = np.where(ch >= 0, self._n.a[np.maximum(ch, 0)], 0).astype(np.float32)
        return self._prior.a[s : s + c].copy(), visits

    def child_move(self, node: int, k: int) -> int:
        """The ``k``-th move (an int) of an evaluated node."""
        self._ready(node)
        return int(self._move.a[self._estart.a[node] + k])

    def child_of(self, node: int, k: int) -> int:
        self._ready(node)
        return int(self._child.a[self._estart.a[node] + k])

    def edge_count(self, node: int) -> int:
        """Edges (legal moves) of an evaluated node; -1 before its evaluation."""
        self._ready(node)
        return int(self._ecount.a[node])

    def is_expanded(self, node: int) -> bool:
        """Whether the node has its edges (an evaluated node gets them on its next visit)."""
        return bool(self._ecount.a[node] >= 0)

    def reopen(self, node: int) -> None:
        """A proven win (``Rules.mate_in_one``) that becomes a game's root is searched: the game goes on."""
        if self._term.a[node] == PROVEN_WIN:
            self._term.a[node] = np.nan

    def mating_edge(self, node: int) -> int | None:
        """The edge of an evaluated node's first move that checkmates, None if none does."""
        move = self.pos[node].mating_move()
        if move is None:
            return None
        self._ready(node)
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        return int(np.flatnonzero(self._move.a[s : s + c] == move)[0])

    def terminal_value(self, node: int) -> float | None:
        v = self._term.a[node]
        return None if math.isnan(v) else float(v)

    def raw_value(self, node: int) -> float:
        """The network's value of an evaluated node for its side to move (its terminal value if it ends the game)."""
        term = self._term.a[node]
        return float(self._v.a[node] if math.isnan(term) else term)

    def child_q(self, node: int) -> np.ndarray:
        """[A] mean value of each child for the side to move at ``node`` (0 where unvisited)."""
        self._ready(node)
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        ch = self._child.a[s : s + c]
        safe = np.maximum(ch, 0)
        n = self._n.a[safe]
        return np.where((ch >= 0) & (n > 0), -self._w.a[safe] / np.maximum(n, 1.0), 0.0).astype(np.float32)

    def q(self, node: int) -> float:
        n = self._n.a[node]
        return float(self._w.a[node] / n) if n > 0 else 0.0

    # -- building -----------------------------------------------------------------------------------------
    def new_node(self, pos: SearchPosition, parent_chain: tuple | None) -> int:
        """Add one node for ``pos``; see ``add_nodes``."""
        return self.add_nodes([pos], [parent_chain])[0]

    def new_root(self, board: chess.Board) -> int:
        """A node for a game's current position, its history read from ``board``'s move stack. A position
        these rules end but the game does not (a repetition or move count nobody claimed) is searched anyway."""
        parent = None
        if board.move_stack:
            before = board.copy()
            before.pop()
            parent = chain_for_board(before, self.history)
        root = self.new_node(self._position(board), parent)
        if self.terminal_value(root) is not None and not board.is_game_over():
            self._term.a[root] = np.nan
        return root

    def add_nodes(self, positions: Sequence[SearchPosition], parent_chains: Sequence[tuple | None]) -> list[int]:
        """Add a node per position and decide which ones end the game (the per-node hot path)."""
        rules, history = self.rules, self.history
        k = len(positions)
        first = self._n.reserve(k, 0)
        self._w.reserve(k, 0)
        self._estart.reserve(k, 0)
        self._ecount.reserve(k, -1)
        self._term.reserve(k, np.nan)
        self._v.reserve(k, 0)
        self._slot.reserve(k, -1)
        terms = []
        chains = self.chain
        end_value = rules.end_value
        for pos, parent in zip(positions, parent_chains):
            key = pos.key()
            hm = pos.halfmove_clock
            reps = count_repetitions(key, hm, parent) if hm >= 4 else 0
            chains.append(extend_chain(key, reps, hm, parent, history))
            terms.append(end_value(pos, reps))
        self.pos.extend(positions)
        self._term.a[first : first + k] = terms
        return list(range(first, first + k))

    def expand(self, nodes: Sequence[int], logits: np.ndarray, values: np.ndarray | None = None) -> None:
        """Give ``nodes`` their network ``logits`` [len(nodes), 4672] and ``values`` [len(nodes)] (Gumbel's completed
        Q-values need them): kept for the edges of the node's next visit while the pool has room, else the edges
        (priors = softmax of the logits over the legal moves) at once."""
        nodes_a = np.asarray(nodes, dtype=np.int64)
        if values is not None:
            self._v.a[nodes_a] = values
        keep = min(len(nodes_a), len(self._free))
        if keep:
            rows = np.asarray(self._free[-keep:], dtype=np.int64)
            del self._free[-keep:]
            self._pool[rows] = logits[:keep]
            self._slot.a[nodes_a[:keep]] = rows
        if keep < len(nodes_a):
            self._expand_now(nodes_a[keep:].tolist(), logits[keep:])

    def expand_pending(self, nodes: Sequence[int] | np.ndarray) -> None:
        """Give evaluated ``nodes`` (their logits in the pool) their edges now."""
        nodes_a = np.asarray(nodes, dtype=np.int64)
        rows = self._slot.a[nodes_a].astype(np.int64)
        self._expand_now(nodes_a.tolist(), self._pool[rows])
        self._slot.a[nodes_a] = -1
        self._free.extend(rows.tolist())

    def _expand_now(self, nodes: list[int], logits: np.ndarray) -> None:
        """Edges for ``nodes``: their legal moves with priors = softmax of their ``logits`` rows (divided by the
        policy temperature)."""
        counts = np.empty(len(nodes), dtype=np.int64)
        flips = np.empty(len(nodes), dtype=np.int32)
        flat: list[int] = []
        positions = self.pos
        for i, node in enumerate(nodes):
            pos = positions[node]
            moves = pos.legal_moves()
            flat.extend(moves)
            counts[i] = len(moves)
            flips[i] = 0 if pos.turn else FLIP_MOVE
        moves_a = np.asarray(flat, dtype=np.int32)
        rows = np.repeat(np.arange(len(nodes)), counts)
        idx = POLICY_INDEX[moves_a ^ flips[rows]]
        vals = logits[rows, idx].astype(np.float32)
        if self.policy_temperature != 1.0:
            vals /= np.float32(self.policy_temperature)
        seg = np.concatenate(([0], np.cumsum(counts)[:-1]))
        vals -= np.repeat(np.maximum.reduceat(vals, seg), counts)
        np.exp(vals, out=vals)
        vals /= np.repeat(np.add.reduceat(vals, seg), counts)
        start = self._prior.reserve(len(vals), 0)
        self._child.reserve(len(vals), -1)
        self._move.reserve(len(vals), 0)
        self._move.a[start : start + len(vals)] = moves_a
        self._prior.a[start : start + len(vals)] = vals
        nodes_a = np.asarray(nodes, dtype=np.int64)
        self._estart.a[nodes_a] = start + seg
        self._ecount.a[nodes_a] = counts

    def add_noise(self, node: int, noise: np.ndarray, epsilon: float) -> None:
        self._ready(node)
        s, c = int(self._estart.a[node]), int(self._ecount.a[node])
        p = self._prior.a[s : s + c]
        p[:] = (1.0 - epsilon) * p + epsilon * noise

    # -- housekeeping -------------------------------------------------------------------------------------
    def drop_pending(self, roots: Sequence[int]) -> None:
        """The subtrees under ``roots`` are no tree's any more: give their logits rows back to the pool now (their
        nodes stay until the next compaction). A vectorised walk, so a played move does not wait for compaction."""
        frontier = np.asarray(roots, dtype=np.int64)
        estart, ecount, child, slot = self._estart.a, self._ecount.a, self._child.a, self._slot.a
        while frontier.size:
            rows = slot[frontier]
            pending = rows >= 0
            if pending.any():
                nodes = frontier[pending]
                slot[nodes] = -1
                self._free.extend(rows[pending].tolist())
            ch = child[ragged_ranges(estart[frontier], np.maximum(ecount[frontier], 0))]
            frontier = ch[ch >= 0]

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
        gather(self._slot, keep, -1)
        used = self._slot.a[: len(keep)]
        taken = np.zeros(len(self._pool), dtype=bool)
        taken[used[used >= 0]] = True
        self._free = np.flatnonzero(~taken)[::-1].tolist()
        self._estart.n = 0
        self._estart.reserve(len(keep), 0)
        self._estart.a[: len(keep)] = new_start
        gather(self._prior, old_edges, 0)
        gather(self._move, old_edges, 0)
        old_child = child[old_edges]
        self._child.n = 0
        self._child.reserve(len(old_edges), -1)
        self._child.a[: len(old_edges)] = new_id[old_child]
        keep_l = keep.tolist()
        self.pos = [self.pos[i] for i in keep_l]
        self.chain = [self.chain[i] for i in keep_l]
        return new_id
