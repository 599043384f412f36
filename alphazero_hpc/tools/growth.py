"""``azhpc bench growth``: how the pipeline's own costs grow with tasks, shards per generation and generations.

Synthetic runs are written by the project's own writers (``write_shard``, ``write_sidecar``, the progress and launch
records), from one shard that a real self-play task played (a uniform evaluator: no network, a few plies), so that
every file has the size and layout of a real one. For each run it measures, in this process, with the files in the
page cache (a warm shared file system, as on a login node that has read the run before):
- ``status``: ``azhpc status``'s reading (collect) and rendering, first call and a refresh (``--watch``'s next
  frame, which re-reads only what changed: the generation in flight);
- training start-up: listing the replay window and opening every new shard (the trainer's first steps before its
  first batch: ``set_aside_bad_new_shards``, ``plan_steps``, ``replay_window``);
- launch: planning and rendering every sbatch script of the chain (``azhpc launch --dry-run``, in process).
Each figure is the median of ``repeats`` calls; the per-item constant (microseconds per shard, per task, per
generation) says whether it grows linearly.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from ..launch.plan import make_plan
from ..launch.record import JobRecord, LaunchRecord, write_record
from ..store import atomic
from ..store.paths import RunPaths
from ..store.progress import TaskProgress, read_task_progress
from ..store.runconfig import resolve_run_config
from ..store.shards import read_sidecar, write_shard, write_sidecar

# (axis, value, generations, tasks, shards per task): each axis moves one quantity, the others held
POINTS: dict[str, list[tuple[int, int, int]]] = {
    "tasks": [(2, t, 4) for t in (16, 64, 256)],
    "shards": [(2, 16, k) for k in (4, 16, 64, 256)],  # 64 -> 4096 shards per generation
    "generations": [(g, 16, 1) for g in (10, 50, 100, 500)],
}


def _template(root: Path) -> tuple[dict[str, Any], dict[str, Any], Any, TaskProgress]:
    """One real shard (arrays and attributes), its sidecar and its task's progress, played by a real task."""
    from ..search.fakes import UniformEvaluator
    from ..selfplay.task import run_selfplay_task

    run_selfplay_task(root, 0, 0, 1, None, ["selfplay.games_per_generation=2", "selfplay.games_per_shard=2",
                                            "selfplay.max_plies=16", "model.history=2"], evaluator=UniformEvaluator(2))
    import h5py

    paths = RunPaths(root)
    with h5py.File(paths.shard(0, 0, 0), "r") as h5:
        arrays = {name: h5[name][()] for name in h5}
        attrs = {k: v for k, v in h5.attrs.items() if k not in ("format", "schema_version", "rows", "azhpc_version", "created")}
    progress = read_task_progress(paths.progress(0, 0))
    assert progress is not None
    return arrays, attrs, read_sidecar(paths.sidecar(0, 0, 0)), progress


def write_synthetic_run(root: Path, generations: int, tasks: int, shards: int, template) -> RunPaths:
    """A run in flight, shaped as a SLURM run: every generation done (shards, sidecars, progress, the network, the
    training's progress and metrics) but the last, whose tasks have written their shards and still run, and whose
    training has not started; a launch record with one array and one training job per generation."""
    arrays, attrs, sidecar, progress = template
    paths = RunPaths(root)
    cfg = resolve_run_config(paths, None, [f"run.generations={generations}", f"slurm.selfplay_tasks={tasks}",
                                           f"selfplay.games_per_generation={tasks * shards * sidecar.games}",
                                           f"selfplay.games_per_shard={sidecar.games}", "model.history=2"])
    from ..net.checkpoint import ensure_initial_checkpoint

    network = paths.model(0)  # every generation's network is a copy of the first
    network.parent.mkdir(parents=True, exist_ok=True)
    ensure_initial_checkpoint(network, cfg.model, 0)
    for g in range(generations):
        for t in range(tasks):
            for k in range(shards):
                path = paths.shard(g, t, k)
                path.parent.mkdir(parents=True, exist_ok=True)
                write_shard(path, arrays, {**attrs, "generation": g, "task": t})
                write_sidecar(paths.sidecar(g, t, k), dataclasses.replace(sidecar, generation=g, task=t, shard=k))
            p = dataclasses.replace(progress, generation=g, task=t, num_tasks=tasks, shards_target=shards,
                                    games_target=shards * sidecar.games, shards_done=shards,
                                    games_done=shards * sidecar.games, games_in_shards=shards * sidecar.games,
                                    positions=shards * sidecar.rows, slurm_job_id=f"{1000 + 2 * g}_{t}",
                                    status="running" if g == generations - 1 else "done")
            paths.progress(g, t).parent.mkdir(parents=True, exist_ok=True)
            atomic.write_json(paths.progress(g, t), p.to_json(), doing="writing progress")
        if g == generations - 1:
            break  # in flight: its training has not started
        paths.train_dir(g + 1).mkdir(parents=True, exist_ok=True)
        atomic.write_json(paths.train_progress(g + 1), {"status": "done", "generation": g + 1, "attempt": 1, "nodes": 1,
                                                         "ranks": 1, "trained_from": g}, doing="writing progress")
        paths.train_metrics(g + 1).write_text("".join(json.dumps({"step": s, "steps": 10, "policy_loss": 2.0, "value_loss": 0.5})
                                                      + "\n" for s in range(1, 11)))
        shutil.copyfile(network, paths.model(g + 1))
    plan = dataclasses.replace(make_plan(cfg, "slurm"), cluster="local")  # states from the record: no scheduler
    jobs = []
    for g in range(generations):
        done = g < generations - 1  # the last generation's processes: recorded as not started (no pid to look up)
        jobs.append(JobRecord(g, "selfplay", f"local-{1000 + 2 * g}", [0, tasks], state="done" if done else "",
                              exit_code=0 if done else None))
        jobs.append(JobRecord(g, "train", f"local-{1001 + 2 * g}", [0, 1], state="done" if done else "",
                              exit_code=0 if done else None))
    write_record(paths, LaunchRecord(plan, "azhpc bench growth", jobs=jobs))
    return paths


def _median_s(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(paths: RunPaths, repeats: int) -> dict[str, float]:
    """Seconds: status first call and refresh, training start-up, launch dry run (medians of ``repeats``)."""
    from ..config import load_config
    from ..launch.start import launch
    from ..report import status as status_mod
    from ..report.render import render
    from ..store.shards import SidecarCache
    from ..train.data import replay_window, set_aside_bad_new_shards
    from ..train.trainer import plan_steps

    cfg = load_config(paths.config)
    last = len(paths.generations()) - 1

    def status_first() -> None:
        status_mod._SIDECARS = SidecarCache()  # a fresh process's caches
        status_mod._SETTLED.clear()
        render(status_mod.collect(paths.root))

    def status_refresh() -> None:
        render(status_mod.collect(paths.root))

    def train_startup() -> None:
        set_aside_bad_new_shards(paths, last)
        plan_steps(cfg, paths, last)
        replay_window(paths, last, cfg.train.window_generations, cfg.train.window_positions)

    dry = paths.root.parent / f"{paths.root.name}-dry"

    def launch_dry() -> None:
        launch(dry, str(paths.config), [], cluster="slurm", dry_run=True)

    status_first()  # warm the page cache and imports once
    out = {"status_s": _median_s(status_first, repeats)}
    status_refresh()
    out["status_refresh_s"] = _median_s(status_refresh, repeats)
    out["train_startup_s"] = _median_s(train_startup, repeats)
    out["launch_dry_run_s"] = _median_s(launch_dry, repeats)
    return out


def run_growth(out: Path, axes: list[str], repeats: int = 3, echo: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Every point of ``axes``: write the synthetic run (removed afterwards), measure it; rows in OUT/growth.json."""
    out.mkdir(parents=True, exist_ok=True)
    template = _template(out / "template")
    rows = []
    for axis in axes:
        for generations, tasks, shards in POINTS[axis]:
            root = out / f"{axis}-g{generations}-t{tasks}-k{shards}"
            shutil.rmtree(root, ignore_errors=True)
            t0 = time.perf_counter()
            paths = write_synthetic_run(root, generations, tasks, shards, template)
            written = time.perf_counter() - t0
            row = {"axis": axis, "generations": generations, "tasks": tasks, "shards_per_generation": tasks * shards,
                   "files": sum(1 for _ in root.rglob("*")), "write_s": round(written, 2), **measure(paths, repeats)}
            rows.append(row)
            echo(_line(row))
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(root.parent / f"{root.name}-dry", ignore_errors=True)
    atomic.write_json(out / "growth.json", {"rows": rows, "repeats": repeats}, doing="writing the growth figures")
    return rows


def _line(row: dict[str, Any]) -> str:
    return (f"{row['axis']:<11} gens {row['generations']:>4} tasks {row['tasks']:>4} shards/gen {row['shards_per_generation']:>5} "
            f"files {row['files']:>6}: status {1000 * row['status_s']:8.1f} ms (refresh {1000 * row['status_refresh_s']:7.1f}), "
            f"train start-up {1000 * row['train_startup_s']:7.1f} ms, launch dry run {1000 * row['launch_dry_run_s']:7.1f} ms")


def per_item(rows: list[dict[str, Any]]) -> list[str]:
    """Each axis's constant: the slope between its first and last point, per unit of what the axis moves, and the
    growth of each figure beside the growth of the axis (linear: the two agree, or the figure grows less)."""
    lines = []
    for axis, key, unit in (("tasks", "tasks", "task"), ("shards", "shards_per_generation", "shard"),
                            ("generations", "generations", "generation")):
        pts = [r for r in rows if r["axis"] == axis]
        if len(pts) < 2:
            continue
        a, b = pts[0], pts[-1]
        parts = [f"{m[:-2]} {(b[m] - a[m]) / (b[key] - a[key]) * 1e6:+.0f} us/{unit} (x{b[m] / a[m]:.1f})"
                 for m in ("status_s", "status_refresh_s", "train_startup_s", "launch_dry_run_s")]
        lines.append(f"{axis} x{b[key] / a[key]:.0f} ({a[key]} -> {b[key]}): " + "; ".join(parts))
    return lines


def plot_growth(rows: list[dict[str, Any]], path: Path) -> Path:
    """One panel per axis (log-log): each figure against what the axis moves, with a linear-growth guide."""
    from ..report.plot import pyplot, save_figure

    plt = pyplot()
    axes_ = [("tasks", "tasks", "self-play tasks per generation"),
             ("shards", "shards_per_generation", "shards per generation"),
             ("generations", "generations", "generations")]
    fig, panels = plt.subplots(1, 3, figsize=(13, 4))
    for panel, (axis, key, label) in zip(panels, axes_):
        pts = [r for r in rows if r["axis"] == axis]
        if not pts:
            continue
        x = [r[key] for r in pts]
        for m, name in (("status_s", "status"), ("status_refresh_s", "status refresh"),
                        ("train_startup_s", "training start-up"), ("launch_dry_run_s", "launch (dry run)")):
            panel.plot(x, [1000 * r[m] for r in pts], marker="o", label=name)
        y0 = 1000 * pts[0]["status_s"]
        panel.plot(x, [y0 * v / x[0] for v in x], color="grey", linestyle=":", label="linear")
        panel.set(xscale="log", yscale="log", xlabel=label, ylabel="ms")
        panel.set_xticks(x, [str(v) for v in x])
        panel.xaxis.set_minor_formatter("")
        panel.grid(True, which="both", alpha=0.3)
    panels[0].legend(fontsize=8)
    fig.suptitle("azhpc bench growth: the pipeline's own costs against run size")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    plt.close(fig)
    return path
