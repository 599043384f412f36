"""``azhpc plot``: PNG figures of a run. matplotlib is an optional extra (pip install 'alphazero_hpc[plot]').

    RUN/plots/elo.png     Elo per generation with 95% intervals, against generations and compute hours
    RUN/plots/losses.png  policy and value loss over all training steps, generation boundaries marked
    RUN/plots/games.png   game length, draw and decisive rates, resignation false positives per generation
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..store import atomic
from ..errors import AzhpcError
from ..store.paths import BenchmarkPaths, RunPaths
from ..store.progress import read_task_progress, read_train_progress


def pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise AzhpcError("matplotlib is not installed: pip install 'alphazero_hpc[plot]' (or pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def compute_hours(paths: RunPaths, generations: int) -> list[float]:
    """Device-hours spent up to the end of each generation's training: self-play task time plus training
    time times its ranks, from the progress files (the last attempt of each; earlier attempts are not kept)."""
    total, out = 0.0, []
    for g in range(generations):
        for p in filter(None, map(read_task_progress, paths.progress_files(g))):
            total += float(p.elapsed_s) / 3600
        tp = read_train_progress(paths.train_progress(g + 1))
        if tp is not None:
            total += max(0.0, tp.updated - tp.started) * max(1, tp.ranks) / 3600
        out.append(total)
    return out


def save_figure(fig: Any, dest: Path) -> None:
    with atomic.atomic_path(dest, "writing a plot") as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")


def plot_run(run_dir: Path, adjudicate_material: int = 0) -> list[Path]:
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    from .status import collect

    paths = RunPaths(run_dir)
    status = collect(run_dir)
    gens = status.generations
    device = "GPU" if status.plan.gpus_per_node else "CPU task"
    written = []

    # Elo ------------------------------------------------------------------------------------------------
    table, on_scale = None, False
    if paths.ledger.exists():
        from ..evaluate.ladder import generation_of, run_ladder

        try:
            table, _, on_scale = run_ladder(run_dir, adjudicate_material=adjudicate_material, write=False)  # changes no record
        except AzhpcError as exc:  # no match scored this way (or no anchor): the other figures still come
            print(f"azhpc plot: no Elo figure: {exc}")
    if table is not None:
        rated: list[tuple[int, float, float, float]] = []  # generation, Elo, its 95% interval
        for r in table:
            g = generation_of(r.name)
            if g is not None and r.elo is not None and r.low is not None and r.high is not None:
                rated.append((g, r.elo, r.low, r.high))
        rated.sort()
        others = sorted(r.name for r in table if r.name.startswith("gen:") and generation_of(r.name) is None)
        if others and not rated:
            print(f"azhpc plot: the Elo figure shows no network: {', '.join(others[:3])}{', ...' if len(others) > 3 else ''} "
                  "played with another search or simulations than the run's own (eval.algorithm, eval.simulations); "
                  "evaluate with those to see the climb")
        anchors = [r for r in table if not r.name.startswith("gen:") and r.elo is not None]
        hours = compute_hours(paths, max([g for g, *_ in rated], default=0) + 1)
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True, layout="constrained")
        for ax, xs, label in ((axes[0], [g for g, *_ in rated], "generation"),
                              (axes[1], [hours[g - 1] if g > 0 else 0.0 for g, *_ in rated], f"{device}-hours (self-play + training)")):
            ys = [elo for _, elo, _, _ in rated]
            err = [[elo - low for _, elo, low, _ in rated], [high - elo for _, elo, _, high in rated]]
            ax.errorbar(xs, ys, yerr=err, fmt="o-", capsize=3, label="network (95% interval)")
            for i, a in enumerate(anchors):
                ax.axhline(a.elo, color=f"C{i + 1}", linestyle="--", linewidth=1, label=f"{a.name} ({a.elo:+.0f})")
            ax.set_xlabel(label)
            ax.grid(alpha=0.3)
        axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[0].set_ylabel(("Elo, Stockfish 15.1 UCI_Elo scale" if on_scale else "Elo (random = 0)") + (f"; draws by rule >= {adjudicate_material} material ahead = win"
                                                  if adjudicate_material else ""))
        axes[0].set_title("Strength per generation")
        axes[1].set_title("Strength per compute")
        axes[1].legend(loc="best", fontsize=8)
        save_figure(fig, paths.plot("elo"))
        plt.close(fig)
        written.append(paths.plot("elo"))

    # Losses ---------------------------------------------------------------------------------------------
    steps, pol, val, bounds, offset = [], [], [], [], 0
    for g in range(len(gens)):
        f = paths.train_metrics(g + 1)
        if not f.exists():
            continue
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip().endswith("}")]
        for r in rows:
            steps.append(offset + r["step"])
            pol.append(r["policy_loss"])
            val.append(r["value_loss"])
        bounds.append(offset)
        offset += max((r["step"] for r in rows), default=0)
    if steps:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
        for ax, ys, name in ((axes[0], pol, "policy loss (cross-entropy, nats)"), (axes[1], val, "value loss (W/D/L cross-entropy, nats)")):
            ax.plot(steps, ys, linewidth=1)
            for b in bounds[1:]:
                ax.axvline(b, color="grey", alpha=0.25, linewidth=0.8)
            ax.set_xlabel("training step (all generations; grey: a new generation's data)")
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
        save_figure(fig, paths.plot("losses"))
        plt.close(fig)
        written.append(paths.plot("losses"))

    # Games ----------------------------------------------------------------------------------------------
    played = [g.selfplay for g in gens if g.selfplay.games]
    if played:
        x = [g.generation for g in gens if g.selfplay.games]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
        axes[0].plot(x, [sp.avg_game_plies for sp in played], "o-")
        axes[0].set_ylabel("mean game length (plies)")
        wdl = [sp.wdl for sp in played]
        axes[1].plot(x, [100 * d / max(1, w + d + b) for w, d, b in wdl], "o-", label="draws")
        axes[1].plot(x, [100 * (w + b) / max(1, w + d + b) for w, d, b in wdl], "s-", label="decisive")
        axes[1].set_ylabel("share of self-play games (%)")
        axes[1].legend()
        fp = [100 * sp.resign_false_positives / sp.playthrough_games if sp.playthrough_games else float("nan")
              for sp in played]
        axes[2].plot(x, fp, "o-", color="C3")
        axes[2].set_ylabel("resign false positives (% of playthrough)")
        for ax in axes:
            ax.set_xlabel("generation")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        save_figure(fig, paths.plot("games"))
        plt.close(fig)
        written.append(paths.plot("games"))
    if not written:
        raise AzhpcError(f"nothing to plot in {paths.root} yet: no finished self-play, training or evaluation")
    return written


def plot_benchmark(out_dir: Path) -> Path:
    """Elo per CPU-hour of every arm of ``azhpc bench learning`` in one figure (OUT/plots/elo-per-cpu-hour.png)."""
    plt = pyplot()
    out = BenchmarkPaths(out_dir)
    try:
        arms = json.loads(out.summary.read_text())["arms"]
        ratings = {r["name"]: r for r in json.loads(out.ladder.read_text())["ratings"]}
    except (OSError, ValueError, KeyError) as exc:
        raise AzhpcError(f"{out.root} has no finished learning benchmark ({exc}): run azhpc bench learning --out {out.root}") from exc
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    for i, (name, arm) in enumerate(arms.items()):
        points = []
        for g, cpu in enumerate(arm["cpu_s"], start=1):
            r = ratings.get(f"{name}/gen:{g}")
            if r and r["elo"] is not None:
                points.append((cpu / 3600, r["elo"], r["elo"] - r["low"], r["high"] - r["elo"]))
        if not points:
            continue
        xs, ys, lo, hi = zip(*points)
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", capsize=3, color=f"C{i}", label=name)
    for j, (name, r) in enumerate(sorted((n, r) for n, r in ratings.items() if "/" not in n and n != "random")):
        if r["elo"] is not None:
            ax.axhline(r["elo"], color="grey", linestyle=("--", ":", "-.")[j % 3], linewidth=1, label=f"{name} ({r['elo']:+.0f})")
    ax.set_xlabel("CPU-hours of self-play and training")
    ax.set_ylabel("Elo (random = 0), 95% intervals")
    ax.set_title("Strength per CPU budget, by search")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, out.plot)
    plt.close(fig)
    return out.plot
