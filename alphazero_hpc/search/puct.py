"""Batched PUCT: one simulation for each of many roots per step, with one network call for all leaves.

Selection runs over the whole ``Forest`` at once (AlphaZero's PUCT with lc0-style first-play urgency);
the leaves that need the network are encoded into one batch for the ``Evaluator``. ``prepare`` and
``finish`` split a step around the network call, so a caller can overlap it with other work.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..config import MCTSConfig
from ..game.attacks import capture_gain
from ..game.encoding import batch_from_chains, encode_batch
from .evaluator import Evaluator
from .forest import Forest


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
    gain: float32 [len(need)] pawns each of those leaves' side to move can win at once (mcts.leaf_capture_value), or None.
    """

    roots: np.ndarray
    path: list[tuple[np.ndarray, np.ndarray]]
    leaf: np.ndarray
    depth: np.ndarray
    values: np.ndarray
    need: np.ndarray
    planes: np.ndarray | None
    gain: np.ndarray | None = None

    def remap(self, new_id: np.ndarray) -> None:
        """Follow a ``Forest.compact`` (its leaves are reachable from its roots, so all survive)."""
        self.roots = new_id[self.roots]
        self.leaf = new_id[self.leaf]
        self.path = [(g, new_id[n]) for g, n in self.path]



class BatchedSearch:
    """Runs one simulation for each of many roots per ``step``, with one network call for all leaves."""

    def __init__(self, forest: Forest, evaluator: Evaluator, cfg: MCTSConfig, history: int) -> None:
        self.forest = forest
        self.evaluator = evaluator
        self.cfg = cfg
        self.history = history
        self.attacks = int(getattr(evaluator, "attack_planes", 0))  # an evaluator that does not say reads plain planes
        self.stats = SearchStats()
        self.deterministic = cfg.algorithm == "gumbel" and cfg.gumbel_interior == "deterministic"

    # Selection ---------------------------------------------------------------------------------------------
    def _select(self, roots: np.ndarray, root_fpu: np.ndarray, root_choice: np.ndarray | None = None
                ) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Walk every root down to a leaf. ``root_choice`` [len(roots)]: the move index a root must take (Gumbel's
        sequential halving), -1 where PUCT chooses.

        Returns ``path``: per depth d, (games, nodes) of the expanded nodes the walk went through;
        ``leaf``: the leaf node per game (-1 where a new node must be made from ``leaf_edge`` of
        ``leaf_parent``) and ``depth``: the leaf's depth per game (root = 0).
        """
        f = self.forest
        cfg = self.cfg
        n_a, w_a, term, slot = f.node_visits, f.node_value_sum, f.node_terminal_value, f.node_lazy_row
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
            pending = slot[cur] >= 0
            if pending.any():  # evaluated nodes visited again get their edges now (lazy expansion)
                f.expand_pending(np.unique(cur[pending]))
            estart, ecount, child, prior = f.node_first_edge, f.node_edge_count, f.edge_child, f.edge_prior  # may have grown
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
            if d > 0 and self.deterministic:
                score = deterministic_scores(p, valid, visited, chn, np.where(visited, -w_a[ch] / np.maximum(chn, 1.0), 0.0),
                                             f.node_network_value[cur], cfg.gumbel_c_visit, cfg.gumbel_c_scale)
            else:
                q = np.where(visited, -w_a[ch] / np.maximum(chn, 1.0), fpu[:, None])
                c_puct = cfg.c_init + np.log((1.0 + parent_n + cfg.c_base) / cfg.c_base)
                score = q + (c_puct * np.sqrt(parent_n))[:, None] * p / (1.0 + chn)
            score[~valid] = -np.inf
            k = score.argmax(axis=1)
            if d == 0 and root_choice is not None:
                chosen = root_choice[games]
                k = np.where(chosen >= 0, chosen, k)
            e = st + k
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

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The evaluator's answer and the seconds it took (safe to call from another thread)."""
        t0 = time.perf_counter()
        logits, values = self.evaluator.evaluate(planes)
        return logits, values, time.perf_counter() - t0

    def prepare(self, roots: Sequence[int], root_fpu: np.ndarray | None = None,
                root_choice: np.ndarray | None = None) -> PendingStep:
        """Select a leaf for each root and encode the leaves that need the network.

        The caller evaluates ``planes`` (possibly on another thread, while it prepares other trees) and
        hands the answer to ``finish``.
        """
        f = self.forest
        roots_a = np.asarray(roots, dtype=np.int64)
        if root_fpu is None:
            root_fpu = np.full(len(roots_a), self.cfg.fpu_reduction_root, np.float32)
        t0 = time.perf_counter()
        path, leaf, leaf_edge, leaf_parent, depth = self._select(roots_a, root_fpu, root_choice)
        t1 = time.perf_counter()
        # Make the new leaves: one push and one end-of-game test per node (game.position, compiled).
        make = np.flatnonzero(leaf_edge >= 0)
        if make.size:
            positions, chains = f.pos, f.chain
            parents = leaf_parent[make].tolist()
            new = [positions[p].push(m) for p, m in zip(parents, f.edge_move[leaf_edge[make]].tolist())]
            nodes = np.asarray(f.add_nodes(new, [chains[p] for p in parents]), dtype=np.int64)
            f.edge_child[leaf_edge[make]] = nodes
            leaf[make] = nodes
        t2 = time.perf_counter()
        term = f.node_terminal_value[leaf]
        values = np.where(np.isnan(term), 0.0, term).astype(np.float32)
        need = np.flatnonzero(np.isnan(term) & (f.node_edge_count[leaf] < 0))
        planes = gain = None
        if need.size:
            batch = batch_from_chains([f.chain[n] for n in leaf[need].tolist()], self.history)
            planes = encode_batch(batch, attacks=self.attacks)
            if self.cfg.leaf_capture_value:
                gain = capture_gain(batch.bitboards[:, 0], batch.turn)
        t3 = time.perf_counter()
        self.stats.t_tree += t1 - t0
        self.stats.t_rules += t2 - t1
        self.stats.t_encode += t3 - t2
        return PendingStep(roots_a, path, leaf, depth, values, need, planes, gain)

    def finish(self, p: PendingStep, logits: np.ndarray | None, values: np.ndarray | None) -> None:
        """Expand the evaluated leaves and back their values up."""
        t0 = time.perf_counter()
        if p.planes is not None:
            assert logits is not None and values is not None
            if p.gain is not None:
                values = with_capture_gain(values, p.gain, self.cfg.leaf_capture_value)
            p.values[p.need] = values
            self.forest.expand(p.leaf[p.need].tolist(), logits, values)
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
        f.node_visits[all_nodes] += 1.0
        f.node_value_sum[all_nodes] += np.concatenate(vals)


def with_capture_gain(values: np.ndarray, gain: np.ndarray, per_pawn: float) -> np.ndarray:
    """Leaf values with the material their side to move can win at once (``game.attacks.capture_gain``) added
    to the value's logit, ``per_pawn`` for each pawn: tanh(atanh(v) + per_pawn * gain). The network's value stands
    where nothing can be won; a win it already sees stays near 1."""
    values = np.asarray(values, np.float32)
    v = np.clip(values.astype(np.float64), -0.999999, 0.999999)
    return np.where(gain > 0, np.tanh(np.arctanh(v) + per_pawn * gain), values).astype(np.float32)


def deterministic_scores(p: np.ndarray, valid: np.ndarray, visited: np.ndarray, chn: np.ndarray, q: np.ndarray,
                         v: np.ndarray, c_visit: float, c_scale: float) -> np.ndarray:
    """mctx's interior rule for Gumbel search, for a [nodes, children] block: the improved policy
    softmax(log prior + sigma(completed q)) minus each child's share of the visits; the child whose visits lag
    its improved probability most has the highest score. ``q`` is each visited child's value for the parent,
    ``v`` [nodes] the network's value of each node (see ``search.gumbel`` for sigma and the completion)."""
    tiny = np.finfo(np.float32).tiny
    total = chn.sum(axis=1)
    pv = np.maximum(p, tiny) * visited
    weighted_q = (pv * q).sum(axis=1) / np.maximum(pv.sum(axis=1), tiny)
    mixed = np.where(visited.any(axis=1), (v + total * weighted_q) / (total + 1.0), v)
    completed = np.where(visited, q, mixed[:, None])
    lo = np.where(valid, completed, np.inf).min(axis=1)
    hi = np.where(valid, completed, -np.inf).max(axis=1)
    rescaled = (completed - lo[:, None]) / np.maximum(hi - lo, 1e-8)[:, None]
    z = np.log(np.maximum(p, 1e-30)) + (c_visit + chn.max(axis=1))[:, None] * c_scale * rescaled
    z = np.where(valid, z, -np.inf)
    z -= z.max(axis=1, keepdims=True)
    probs = np.exp(z)
    probs /= probs.sum(axis=1, keepdims=True)
    return probs - chn / (1.0 + total)[:, None]
