"""One network from the last K generations of a run: their weights averaged (stochastic weight averaging, SWA),
the batch-norm statistics then measured again on the positions the newest of them trained on.

A generation's network is one point of a noisy walk: each trains a few hundred steps at a constant rate on a
window that moves. The mean of several consecutive points sits nearer the middle of the basin they wander in
(Izmailov et al. 2018, "Averaging Weights Leads to Wider Optima"); lc0's and KataGo's trainers publish averaged
networks for that reason. Averaged weights change every layer's activations, so the running means and variances
that the batch norms carry from training no longer fit: ``torch.optim.swa_utils.update_bn`` measures them again.

Where the run has played generation G's games, their positions (which none of the averaged networks trained on)
score the average against generation G's own network: the trainer's policy and value losses, the value against
the games' results.

The result is written as generation G of a new run folder (the source run's config, ``models/gen-G.pt``), so
``azhpc evaluate OUT --generation G`` and ``azhpc uci OUT/models/gen-G.pt`` take it like any network. The source
run is only read.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Callable

import torch
from torch.optim.swa_utils import AveragedModel, update_bn

from ..errors import AzhpcError
from ..net.checkpoint import load_model, save_checkpoint
from ..net.model import AlphaZeroNet
from ..store import atomic
from ..store.paths import RunPaths
from ..store.runconfig import read_run_config
from .data import BatchPlan, ShardRef, WindowDataset, replay_window
from .trainer import alphazero_loss

BN_BATCH = 256  # positions per batch of the batch-norm pass


@dataclass(frozen=True)
class Averaged:
    path: Path  # OUT/models/gen-G.pt
    generations: tuple[int, ...]
    bn_positions: int  # positions the batch-norm statistics were measured on
    held_out: dict[str, tuple[float, float]]  # "gen G", "average": (policy, value) loss on G's games; {} without them


def average_generations(run_dir: Path, generation: int, last: int, out_dir: Path, bn_positions: int = 8192,
                        echo: Callable[[str], None] = lambda s: None) -> Averaged:
    """Average the networks of generations ``generation - last + 1`` .. ``generation`` of ``run_dir`` into
    ``out_dir``/models/gen-``generation``.pt; batch norms refit on ``bn_positions`` positions of the window that
    generation ``generation`` trained on (the shards of generations G - train.window_generations .. G - 1)."""
    src, out = RunPaths(run_dir), RunPaths(out_dir)
    cfg = read_run_config(src)
    if last < 2:
        raise AzhpcError(f"--last {last}: averaging needs at least 2 generations")
    first = generation - last + 1
    if first < 1:
        raise AzhpcError(f"--last {last} from generation {generation} reaches before generation 1 (generation 0 is "
                         f"the random network): use --last {generation} or less")
    gens = tuple(range(first, generation + 1))
    missing = [g for g in gens if not src.model(g).exists()]
    if missing:
        raise AzhpcError(f"{src.root} has no network of generation(s) {', '.join(map(str, missing))}: "
                         "average generations that were trained (azhpc status shows them)")
    if out.root.resolve() == src.root.resolve():
        raise AzhpcError(f"--out {out.root} is the source run: choose a new folder (the average is not a generation "
                         "of the run that made it)")
    if out.model(generation).exists():
        raise AzhpcError(f"{out.model(generation)} exists: choose another --out, or delete it to average again")
    if out.config.exists() and out.config.read_text() != src.config.read_text():
        raise AzhpcError(f"{out.config} holds another config than {src.config}: choose a new --out")
    window = replay_window(src, generation - 1, cfg.train.window_generations, cfg.train.window_positions)
    if not window:
        raise AzhpcError(f"{src.root} has no self-play shards of generations {max(0, generation - cfg.train.window_generations)}"
                         f"-{generation - 1}: the batch norms of an average are measured on them (a kept network "
                         "folder without its shards cannot be averaged)")

    averaged: AveragedModel | None = None
    for g in gens:
        newest, _ = load_model(src.model(g), expect=cfg.model)  # the loop ends on generation G's own network
        averaged = averaged or AveragedModel(newest)
        averaged.update_parameters(newest)
        echo(f"  generation {g}: added ({int(averaged.n_averaged)} averaged)")
    assert averaged is not None
    planes = [item["planes"] for item in _batches(window, (cfg.run.seed, generation, 7), bn_positions, cfg.model.attack_sets)]
    update_bn(planes, averaged)
    net = averaged.module
    assert isinstance(net, AlphaZeroNet)
    net.eval()
    measured = sum(len(p) for p in planes)
    echo(f"  batch norms measured on {measured} positions of {len(window)} shards")
    held_out: dict[str, tuple[float, float]] = {}
    games = replay_window(src, generation, 1)
    if games:
        scored = _batches(games, (cfg.run.seed, generation, 8), min(sum(r.rows for r in games), bn_positions),
                          cfg.model.attack_sets)
        held_out = {f"gen {generation}": held_out_losses(newest, scored), "average": held_out_losses(net, scored)}
        positions = sum(len(b["planes"]) for b in scored)
        for name, (policy, value) in held_out.items():
            echo(f"  {name}: policy loss {policy:.4f}, value loss {value:.4f} on generation {generation}'s games "
                 f"({positions} positions that no averaged network trained on)")

    atomic.write_text(out.config, src.config.read_text(), doing="writing the averaged network's config")
    save_checkpoint(out.model(generation), net, generation,
                    extra={"averaged": {"run": str(src.root.resolve()), "generations": list(gens), "bn_positions": measured}})
    return Averaged(out.model(generation), gens, measured, held_out)


def _batches(refs: list[ShardRef], seed: tuple[int, ...], positions: int, attacks: int) -> list[dict]:
    """``positions // BN_BATCH`` (at least one) batches of ``refs``' rows in a seeded order (``WindowDataset`` items;
    a batch whose shards were all unreadable is left out)."""
    data = WindowDataset(BatchPlan(refs, BN_BATCH, seed=seed), attacks=attacks)
    return [item for item in islice(data, max(1, positions // BN_BATCH)) if "planes" in item]


@torch.no_grad()
def held_out_losses(model: torch.nn.Module, batches: list[dict]) -> tuple[float, float]:
    """The trainer's policy and value losses of ``model`` over ``batches`` (``WindowDataset`` items), in float32;
    the value against the game's result."""
    model.eval()
    total_p = total_v = 0.0
    rows = 0
    for b in batches:
        logits, value = model(b["planes"])
        policy, value_loss, _ = alphazero_loss(logits, value, b["policy"], b["wdl"])
        total_p += float(policy) * len(b["planes"])
        total_v += float(value_loss) * len(b["planes"])
        rows += len(b["planes"])
    return total_p / max(rows, 1), total_v / max(rows, 1)
