"""Batched PUCT search over many game trees at once, without torch.

All trees of a process live in one ``Forest`` of flat numpy arrays, so one selection step for every game is
a handful of numpy operations over a [games, children] matrix, and the leaves of all games are evaluated in
one ``Evaluator.evaluate`` call. Per-node Python work is only what python-chess must do: copy the parent
board, push the move, generate legal moves and test for the end of the game.

Values are from the side to move at the node: ``node_w / node_n`` is the mean value for the player who
moves there; a child's value for its parent is the negation.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

import chess
import numpy as np

from .config import MCTSConfig
from .encoding import batch_from_chains, chain_for_board, count_repetitions, encode_batch, extend_chain, move_indices

NOT_TERMINAL = np.float32(np.nan)


class Evaluator(Protocol):
    """What the search asks of a network. ``planes`` is float32 [B, C, 8, 8]; the answer is policy logits
    float32 [B, 4672] and values float32 [B] in [-1, 1] for the side to move."""

    history: int

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class Rules:
    """When a position ends the game (the search and the game use the same rules)."""

    repetitions_for_draw: int = 3
    no_progress_plies: int = 100
    max_plies: int = 512


@dataclass
class SearchStats:
    """Time and counts of a search, for the benchmark (seconds)."""

    simulations: int = 0
    evaluations: int = 0
    batches: int = 0
    t_network: float = 0.0
    t_rules: float = 0.0
    t_tree: float = 0.0
    t_encode: float = 0.0


@dataclass
class PendingStep:
    """A selection whose leaves await the network. Node ids refer to the forest (see ``remap``).

    planes: float32 [len(need), C, 8, 8] or None when no leaf needs the network.
    """

    roots: np.ndarray
    path: list[tuple[np.ndarray, np.ndarray]]
    leaf: np.ndarray
    depth: np.ndarray
    values: np.ndarray
    need: np.ndarray
    planes: np.ndarray | None

    def remap(self, new_id: np.ndarray) -> None:
        """Follow a ``Forest.compact`` (its leaves are reachable from its roots, so all survive)."""
        self.roots = new_id[self.roots]
        self.leaf = new_id[self.leaf]
        self.path = [(g, new_id[n]) for g, n in self.path]


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

    def is_expanded(self, node: int) -> bool:
        return bool(self._ecount.a[node] >= 0)

    def terminal_value(self, node: int) -> float | None:
        v = self._term.a[node]
        return None if math.isnan(v) else float(v)

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
        terms = []
        chains, legal_out = self.chain, self.legal
        max_plies, no_progress, rep_draw = rules.max_plies, rules.no_progress_plies, rules.repetitions_for_draw
        for board, parent in zip(boards, parent_chains):
            occ = board.occupied_co
            key = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                   occ[1], occ[0], board.turn, board.castling_rights, board.ep_square)
            hm = board.halfmove_clock
            reps = count_repetitions(key, hm, parent) if hm >= 4 else 0
            chains.append(extend_chain(key, reps, hm, parent, history))
            legal = None
            term = NOT_TERMINAL
            if reps + 1 >= rep_draw:
                term = 0.0
            else:
                legal = list(board.generate_legal_moves())
                if not legal:
                    term = -1.0 if board.is_check() else 0.0
                elif hm >= no_progress:
                    term = 0.0
                elif not (board.pawns | board.rooks | board.queens) and board.is_insufficient_material():
                    term = 0.0
                elif 2 * board.fullmove_number - 1 - board.turn >= max_plies:  # == board.ply()
                    term = 0.0
            terms.append(term)
            legal_out.append(legal if term != term else None)  # term != term: NaN, not terminal
        self.board.extend(boards)
        self._term.a[first : first + k] = terms
        return list(range(first, first + k))

    def expand(self, nodes: Sequence[int], logits: np.ndarray) -> None:
        """Give ``nodes`` their edges with priors = softmax of ``logits`` [len(nodes), 4672] over legal moves."""
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


def ragged_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ranges [starts[i], starts[i] + counts[i])."""
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total)


class BatchedSearch:
    """Runs one simulation for each of many roots per ``step``, with one network call for all leaves."""

    def __init__(self, forest: Forest, evaluator: Evaluator, cfg: MCTSConfig, history: int) -> None:
        self.forest = forest
        self.evaluator = evaluator
        self.cfg = cfg
        self.history = history
        self.stats = SearchStats()

    # Selection ---------------------------------------------------------------------------------------------
    def _select(self, roots: np.ndarray, root_fpu: np.ndarray) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Walk every root down to a leaf.

        Returns ``path``: per depth d, (games, nodes) of the expanded nodes the walk went through;
        ``leaf``: the leaf node per game (-1 where a new node must be made from ``leaf_edge`` of
        ``leaf_parent``) and ``depth``: the leaf's depth per game (root = 0).
        """
        f = self.forest
        cfg = self.cfg
        n_a, w_a = f._n.a, f._w.a
        estart, ecount, child, prior, term = f._estart.a, f._ecount.a, f._child.a, f._prior.a, f._term.a
        n_games = len(roots)
        games = np.arange(n_games)
        cur = roots.astype(np.int64)
        fpu_red = root_fpu.astype(np.float32)
        path: list[tuple[np.ndarray, np.ndarray]] = []
        leaf = np.full(n_games, -1, dtype=np.int64)
        leaf_edge = np.full(n_games, -1, dtype=np.int64)
        leaf_parent = np.full(n_games, -1, dtype=np.int64)
        depth = np.zeros(n_games, dtype=np.int64)
        d = 0
        while games.size:
            # A terminal node, or a root still waiting for its first evaluation, is the leaf.
            stop = ~np.isnan(term[cur]) | (ecount[cur] < 0)
            if stop.any():
                leaf[games[stop]] = cur[stop]
                depth[games[stop]] = d
                go = ~stop
                games, cur, fpu_red = games[go], cur[go], fpu_red[go]
                if not games.size:
                    break
            path.append((games, cur))
            st = estart[cur]
            cnt = ecount[cur].astype(np.int64)
            cols = np.arange(int(cnt.max()))
            valid = cols[None, :] < cnt[:, None]
            eidx = np.where(valid, st[:, None] + cols[None, :], 0)
            ch = child[eidx]
            visited = valid & (ch >= 0)
            chn = np.where(visited, n_a[ch], 0.0)
            p = np.where(valid, prior[eidx], 0.0)
            parent_n = n_a[cur]
            parent_q = w_a[cur] / np.maximum(parent_n, 1.0)
            fpu = parent_q - fpu_red * np.sqrt((p * visited).sum(axis=1))
            q = np.where(visited, -w_a[ch] / np.maximum(chn, 1.0), fpu[:, None])
            c_puct = cfg.c_init + np.log((1.0 + parent_n + cfg.c_base) / cfg.c_base)
            score = q + (c_puct * np.sqrt(parent_n))[:, None] * p / (1.0 + chn)
            score[~valid] = -np.inf
            e = st + score.argmax(axis=1)
            nxt = child[e]
            new = nxt < 0
            if new.any():
                g = games[new]
                leaf_edge[g] = e[new]
                leaf_parent[g] = cur[new]
                depth[g] = d + 1
                go = ~new
                games, nxt = games[go], nxt[go]
            cur = nxt
            fpu_red = np.full(len(games), cfg.fpu_reduction, np.float32)
            d += 1
        return path, leaf, leaf_edge, leaf_parent, depth

    def step(self, roots: Sequence[int], root_fpu: np.ndarray | None = None) -> None:
        """One simulation for each root (or its first evaluation if it is not expanded)."""
        pending = self.prepare(roots, root_fpu)
        if pending.planes is None:
            self.finish(pending, None, None)
        else:
            logits, values, seconds = self.evaluate(pending.planes)
            self.stats.t_network += seconds
            self.finish(pending, logits, values)

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The evaluator's answer and the seconds it took (safe to call from another thread)."""
        t0 = time.perf_counter()
        logits, values = self.evaluator.evaluate(planes)
        return logits, values, time.perf_counter() - t0

    def prepare(self, roots: Sequence[int], root_fpu: np.ndarray | None = None) -> PendingStep:
        """Select a leaf for each root and encode the leaves that need the network.

        The caller evaluates ``planes`` (possibly on another thread, while it prepares other trees) and
        hands the answer to ``finish``.
        """
        f = self.forest
        roots_a = np.asarray(roots, dtype=np.int64)
        if root_fpu is None:
            root_fpu = np.full(len(roots_a), self.cfg.fpu_reduction_root, np.float32)
        t0 = time.perf_counter()
        path, leaf, leaf_edge, leaf_parent, depth = self._select(roots_a, root_fpu)
        t1 = time.perf_counter()
        # Make the new leaves: the python-chess work, one node at a time.
        make = np.flatnonzero(leaf_edge >= 0)
        if make.size:
            boards, chains, edge_move = f.board, f.chain, f.edge_move
            new_boards = []
            for e, pnode in zip(leaf_edge[make].tolist(), leaf_parent[make].tolist()):
                b = boards[pnode].copy(stack=False)
                b.push(edge_move[e])
                new_boards.append(b)
            nodes = np.asarray(f.add_nodes(new_boards, [chains[p] for p in leaf_parent[make].tolist()]), dtype=np.int64)
            f._child.a[leaf_edge[make]] = nodes
            leaf[make] = nodes
        t2 = time.perf_counter()
        term = f._term.a[leaf]
        values = np.where(np.isnan(term), 0.0, term).astype(np.float32)
        need = np.flatnonzero(np.isnan(term) & (f._ecount.a[leaf] < 0))
        planes = None
        if need.size:
            batch = batch_from_chains([f.chain[n] for n in leaf[need].tolist()], self.history)
            planes = encode_batch(batch)
        t3 = time.perf_counter()
        self.stats.t_tree += t1 - t0
        self.stats.t_rules += t2 - t1
        self.stats.t_encode += t3 - t2
        return PendingStep(roots_a, path, leaf, depth, values, need, planes)

    def finish(self, p: PendingStep, logits: np.ndarray | None, values: np.ndarray | None) -> None:
        """Expand the evaluated leaves and back their values up."""
        t0 = time.perf_counter()
        if p.planes is not None:
            assert logits is not None and values is not None
            p.values[p.need] = values
            self.forest.expand(p.leaf[p.need].tolist(), logits)
            self.stats.evaluations += len(p.need)
            self.stats.batches += 1
        self._backup(p.path, p.leaf, p.depth, p.values)
        self.stats.simulations += len(p.roots)
        self.stats.t_tree += time.perf_counter() - t0

    def _backup(self, path: list[tuple[np.ndarray, np.ndarray]], leaf: np.ndarray, depth: np.ndarray, values: np.ndarray) -> None:
        """Add each leaf's value to the nodes on its path: +v at the leaf, then alternating signs upwards."""
        f = self.forest
        nodes = [leaf]
        vals = [values]
        for d, (games, nd) in enumerate(path):
            sign = 1.0 - 2.0 * ((depth[games] - d) & 1)
            nodes.append(nd)
            vals.append(values[games] * sign.astype(np.float32))
        all_nodes = np.concatenate(nodes)
        f._n.a[all_nodes] += 1.0
        f._w.a[all_nodes] += np.concatenate(vals)
