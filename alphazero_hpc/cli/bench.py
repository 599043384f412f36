"""``azhpc bench``: the benchmarks (self-play, shards, training, PGN import, pretraining, learning, chaos)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from ..store.paths import RunPaths
from .app import main
from .options import config_options, renamed


@main.group()
def bench() -> None:
    """Benchmarks that print their figures."""


@bench.command("selfplay")
@config_options("configs/small.yaml")
@click.option("--seconds", type=click.FloatRange(min=1), default=30.0, show_default=True, help="Measured window.")
@click.option("--device", default="auto", show_default=True)
@click.option("--search-workers", "workers", default="0", show_default=True, metavar="K[,K...]",
              help="Search processes sharing the network (0: one process does both); a list measures each in turn.")
@renamed("--workers", "--search-workers", "workers")
@click.option("--repeats", "repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Measure the --search-workers (or --vary) values this many times, alternating; each value's median run is shown.")
@renamed("--repeat", "--repeats", "repeat", type=click.IntRange(min=1))
@click.option("--evaluator", type=click.Choice(["network", "uniform"]), default="network", show_default=True,
              help="uniform: a free evaluator (no network), to measure the search and the transport alone.")
@click.option("--vary", default=None, metavar="SECTION.KEY=V1,V2[,...]",
              help="Measure each value of one config key in turn (an A/B in one run), e.g. mcts.lazy_rows=0,4096.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_selfplay_cmd(config_path: Path, overrides: tuple[str, ...], seconds: float, device: str, workers: str,
                       repeat: int, evaluator: str, vary: str | None, as_json: bool) -> None:
    """Self-play speed against the raw network at the same batch size, in one run.

    With several --search-workers values (or --vary values) the runs follow each other in this process (with --repeats,
    alternating, so that a shared machine's drift hits every value alike) and the last lines compare their
    simulations/s and CPU per simulation with the first value's.
    """
    from ..tools.bench import compare_selfplay
    from ..config import load_config

    try:
        ks = list(dict.fromkeys(int(k) for k in workers.split(",")))
        if min(ks) < 0:
            raise ValueError
    except ValueError:
        raise click.BadParameter(f"{workers!r}: give worker counts >= 0 separated by commas, e.g. 1,2",
                                param_hint="--search-workers") from None
    variants: list[tuple[str, tuple[str, ...]]] = [("", overrides)]
    if vary:
        key, _, values = vary.partition("=")
        if not key or not values:
            raise click.BadParameter(f"{vary!r}: give SECTION.KEY=V1,V2, e.g. mcts.lazy_rows=0,4096", param_hint="--vary")
        variants = [(f"{key}={v}", (*overrides, f"{key}={v}")) for v in dict.fromkeys(values.split(","))]
        if len(ks) > 1:
            raise click.BadParameter("give one --search-workers value with --vary", param_hint="--vary")
    cfgs = [load_config(config_path, o) for _, o in variants]
    ev = None
    if evaluator == "uniform":
        from ..search.fakes import UniformEvaluator

        ev = UniformEvaluator(cfgs[0].model.history, cfgs[0].model.attack_sets)
    arms = [(f"{k} workers" if not vary else name, k, cfg) for k in ks for (name, _), cfg in zip(variants, cfgs)]
    result = compare_selfplay(arms, str(config_path), device, seconds, repeat, vary.partition("=")[0] if vary else "workers", ev)
    click.echo(json.dumps(result.to_json(), indent=1) if as_json else result.render())


@bench.command("shards")
@config_options("configs/small.yaml")
@click.option("--games", type=click.IntRange(min=1), default=64, show_default=True, help="Games in the shard.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_shards_cmd(config_path: Path, overrides: tuple[str, ...], games: int, as_json: bool) -> None:
    """Shard bytes per position and read/write speed for each compression (lc0's V6 record: 8,356 bytes)."""
    from ..tools.bench import bench_shards
    from ..config import load_config

    rows = bench_shards(load_config(config_path, overrides), games)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    click.echo(f"{rows[0]['rows']} positions, history {rows[0]['history']}, "
               f"{rows[0]['policy_entries_per_position']:.1f} policy entries per position")
    for r in rows:
        click.echo(f"{r['compression']:5s} {r['bytes_per_position']:8.1f} bytes/position   write {r['write_positions_per_s']:10.0f}/s   "
                   f"read {r['read_positions_per_s']:10.0f}/s")


@bench.command("train")
@config_options("configs/small.yaml")
@click.option("--loader-workers", "workers", type=click.IntRange(min=0), default=2, show_default=True, help="DataLoader worker processes.")
@renamed("--workers", "--loader-workers", "workers", type=click.IntRange(min=0))
@click.option("--steps", type=click.IntRange(min=10), default=60, show_default=True, help="Steps of the real run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_train_cmd(config_path: Path, overrides: tuple[str, ...], workers: int, steps: int, as_json: bool) -> None:
    """Trainer samples/s, data loader samples/s alone, and the share of step time spent waiting for data."""
    from ..tools.bench import bench_train
    from ..config import load_config

    r = bench_train(load_config(config_path, overrides), workers, steps)
    if as_json:
        click.echo(json.dumps(r, indent=1))
        return
    click.echo(f"batch {r['batch_size']}, {r['positions']} positions, {r['loader_workers']} loader workers, on {r['device']} (amp {r['amp']})")
    click.echo(f"trainer alone          {r['trainer_samples_per_s']:10.0f} samples/s  ({r['trainer_threads']} torch thread{'s' if r['trainer_threads'] > 1 else ''}, as the trainer chose)")
    click.echo(f"loader alone           {r['loader_samples_per_s']:10.0f} samples/s  ({r['loader_over_trainer']:.1f}x the trainer)")
    click.echo(f"real run               {r['real_run_samples_per_s']:10.0f} samples/s, waiting for data {r['real_run_data_wait_share']:.1%} of step time")


@bench.command("import-pgn")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@config_options("configs/small.yaml")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Alternating runs of each.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_import_cmd(files: tuple[Path, ...], config_path: Path, overrides: tuple[str, ...], repeats: int, as_json: bool) -> None:
    """Import positions/s against python-chess's own parse rate of the same files, in one run."""
    from ..tools.pgnbench import bench_import

    r = bench_import(list(files), config_path, overrides, repeats)
    if as_json:
        click.echo(json.dumps(r, indent=1))
        return
    spread = lambda xs: f"{min(xs):,.0f}-{max(xs):,.0f}"  # noqa: E731
    click.echo(f"python-chess parse  {r['parse_median']:10,.0f} positions/s (median of {repeats}, {spread(r['parse_positions_per_s'])})")
    click.echo(f"azhpc import-pgn    {r['import_median']:10,.0f} positions/s (median of {repeats}, {spread(r['import_positions_per_s'])}; "
               f"{r['positions_imported']:,} of {r['positions_parsed']:,} positions kept)")
    click.echo(f"import / parse      {r['import_over_parse']:.2f}")


@bench.command("pretrain")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("scratch/pretrain-check"), show_default=True,
              help="Folder: the PGN, the run (RUN/import, models/gen-0000.pt, eval/ledger.jsonl). Started again it continues.")
@click.option("--games", type=click.IntRange(min=1), default=2000, show_default=True, help="Stockfish games to play and import.")
@click.option("--depth", type=click.IntRange(min=1, max=20), default=2, show_default=True, help="Stockfish's search depth per move.")
@click.option("--epochs", type=click.FloatRange(min=0.01), default=3.0, show_default=True, help="Passes over the imported positions [pretrain.epochs].")
@config_options("configs/learn-2x32.yaml")
@click.option("--eval-games", type=click.IntRange(min=2), default=40, show_default=True, help="Games against each opponent.")
@click.option("--simulations", type=click.IntRange(min=1), default=None, help="Simulations per move [eval.simulations].")
@click.option("--stockfish-workers", "workers", type=click.IntRange(min=1), default=None,
              help="Stockfish processes (and training threads) [default: the cores].")
@renamed("--workers", "--stockfish-workers", "workers", type=click.IntRange(min=1))
@click.option("--stockfish", "stockfish_path", help="Stockfish binary [default: stockfish on PATH, or /usr/games/stockfish].")
def bench_pretrain_cmd(out_dir: Path, games: int, depth: int, epochs: float, config_path: Path, overrides: tuple[str, ...],
                       eval_games: int, simulations: int | None, workers: int | None, stockfish_path: str | None) -> None:
    """Learning check of import-pgn: Stockfish games -> import -> pretraining -> matches against random and greedy
    under the rules of chess (in OUT/run/eval/ledger.jsonl)."""
    from ..evaluate.engines import find_stockfish
    from ..tools.pgnbench import learning_check

    learning_check(out_dir, find_stockfish(stockfish_path), games, depth, config_path, (f"pretrain.epochs={epochs}", *overrides),
                   eval_games, simulations or 0,
                   workers=workers or len(os.sched_getaffinity(0)), echo=click.echo)


@bench.command("learning")
@config_options("configs/learn.yaml", " Applies to every arm, over the fields that the arm sets.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("scratch/learning"), show_default=True,
              help="Benchmark folder: one run folder per arm, benchmark.json, ladder.json (started again, it continues).")
@click.option("--budget-cpu-hours", type=click.FloatRange(min=0.001), default=1.0, show_default=True,
              help="CPU time of self-play and training per arm (every process the arm starts, a stopped generation's included).")
@click.option("--arms", default="puct,gumbel8,gumbel8-q,gumbel16,gumbel16-q", show_default=True,
              help="Comma list of: puct (24 simulations), gumbel8, gumbel8-q, gumbel16, gumbel16-q (-q: train.value_target_q_ratio=0.5), "
                   "4x64-bf16 (gumbel16-q with a 4x64 net, 64 games in flight, bf16 search and training), 4x64-g32 (32 "
                   "simulations), 4x64-decay (train.lr_decay=0.985), 4x64-rr8 (replay ratio 8 over 6 generations), "
                   "6x64-rr8 (4x64-rr8 with 6 blocks), 4x64-convert (4x64-rr8 that plays won "
                   "positions out: adjudicated wins taught as wins half the time, games to ply 160), 4x64-mate (4x64-rr8 "
                   "with mcts.mate_in_one), 4x64-attacks (4x64-mate with model.attack_planes: configs/learn.yaml), "
                   "4x64-tactics (4x64-attacks with model.tactic_planes), 4x64-se (4x64-attacks with model.se_ratio=4), 4x64-m4 (4x64-attacks considering 4 root moves), 4x64-qi (4x64-attacks whose value targets use the improved policy's q), 4x64-capture (4x64-attacks whose search adds to each leaf's value the material a capture wins there, mcts.leaf_capture_value), 4x64-td4 (4x64-attacks whose value targets mix in the root value 4 plies later, train.value_target_horizon=4), 4x64-lr2 (4x64-attacks at train.lr=0.1), 4x64-t16 (4x64-attacks sampling moves for 16 plies, not 40), 4x64-cs01 (4x64-attacks at mcts.gumbel_c_scale=0.1), 4x64-material (4x64-attacks with model.material_head), 4x64-w12 (4x64-attacks training over the last 12 generations, not 6), 4x64-rr4 (4x64-attacks at train.replay_ratio=4, not 8), 4x64-rr2 (4x64-attacks at train.replay_ratio=2), 4x64-rr1 (4x64-attacks at train.replay_ratio=1), 4x64-g8 (4x64-rr1 at 8 simulations over 8 considered moves), 4x64-g32m8 (4x64-rr1 at 32 simulations over 8 considered moves), 6x64-rr2 (4x64-rr2 with 6 blocks; configs/learn.yaml), 8x64-rr2 (4x64-rr2 with 8 blocks), 6x64-g32m8 (6x64-rr2 at 32 simulations over 8 considered moves), 6x64-qi (6x64-rr2 whose value targets use the improved policy's q), 6x64-cs01 (6x64-rr2 at mcts.gumbel_c_scale=0.1), 6x64-int8 (6x64-rr2 with self-play on the network quantized to int8).")
@click.option("--games", type=click.IntRange(min=2), default=40, show_default=True,
              help="Games of each arm's last network against random, greedy and Stockfish.")
@click.option("--ladder-games", type=click.IntRange(min=2), default=10, show_default=True,
              help="Games of each earlier network against random.")
@click.option("--ladder-every", type=click.IntRange(min=1), default=1, show_default=True,
              help="Only every K-th earlier network plays random (the last one always plays every anchor).")
@click.option("--stockfish-nodes", type=click.IntRange(min=1), default=100, show_default=True,
              help="Stockfish's node limit (skill 0) as an anchor.")
@click.option("--scale/--no-scale", default=True, show_default=True,
              help="Also rate each arm's last network on the calibrated Stockfish 15.1 UCI_Elo scale; all arms in one fit.")
@click.option("--device", default="cpu", show_default=True, help="Device of the evaluations.")
def bench_learning_cmd(config_path: Path, out_dir: Path, budget_cpu_hours: float, arms: str, games: int,
                       ladder_games: int, ladder_every: int, stockfish_nodes: int, scale: bool, device: str,
                       overrides: tuple[str, ...]) -> None:
    """Arms of search (PUCT; Gumbel at 8 and 16 simulations, with and without q-mixing) side by side on one CPU
    budget each, then one Elo ladder of every network against random, greedy and Stockfish (chess rules only),
    on the calibrated Stockfish 15.1 UCI_Elo scale with --scale."""
    from ..store.paths import BenchmarkPaths
    from ..tools.learning import render, run_benchmark

    result, ladder = run_benchmark(out_dir, config_path, [a.strip() for a in arms.split(",") if a.strip()],
                                   budget_cpu_hours, games, ladder_games, stockfish_nodes, device, overrides, click.echo,
                                   ladder_every, scale)
    click.echo(render(result, ladder))
    click.echo(f"ladder in {BenchmarkPaths(out_dir).ladder}; azhpc plot {out_dir} draws Elo per CPU-hour")


@bench.command("chaos")
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@config_options("configs/tiny.yaml")
@click.option("--generations", type=click.IntRange(min=1), default=30, show_default=True, help="Generations of the run.")
@click.option("--faults", type=click.IntRange(min=0), default=40, show_default=True, help="Faults to inject over the run.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the faults' kinds, delays and victims.")
@click.option("--mean-gap", type=click.FloatRange(min=0), default=8.0, show_default=True,
              help="Mean seconds between faults (exponential).")
@click.option("--max-fill-mb", type=click.IntRange(min=1), default=512, show_default=True,
              help="A full-disk fault fills the run's filesystem only when it has at most this much free (a small scratch mount).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=7200.0, show_default=True,
              help="Seconds before the driver gives up on the run completing.")
def bench_chaos_cmd(run_dir: Path, config_path: Path, overrides: tuple[str, ...], generations: int, faults: int, seed: int,
                    mean_gap: float, max_fill_mb: int, timeout_s: float) -> None:
    """Launch a local run into RUN and kill, fill and corrupt it at random (seeded) moments, resuming it after each
    stop; then check that every game is on disk exactly once and every network loads (RUN/logs/chaos.jsonl)."""
    from ..tools.chaos import run_chaos

    report = run_chaos(run_dir, config_path, overrides, generations, faults, seed, mean_gap, max_fill_mb,
                       timeout_s=timeout_s, echo=click.echo)
    kinds: dict[str, int] = {}
    for fault in report.faults:
        kinds[fault["event"]] = kinds.get(fault["event"], 0) + 1
    click.echo(f"{len(report.faults)} faults ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}), {report.resumes} "
               f"resumes, {report.games} games, {report.wall_s:.0f} s")
    if not report.ok:
        raise click.ClickException("the run lost or repeated something: " + "; ".join(report.problems))
    click.echo(f"every game once, every network loads; the log: {RunPaths(run_dir).chaos_log}")


@bench.command("growth")
@click.argument("out", type=click.Path(path_type=Path), default="scratch/growth")
@click.option("--axes", default="tasks,shards,generations", show_default=True, metavar="AXIS[,AXIS...]",
              help="What grows: tasks (16 -> 256 per generation), shards (64 -> 4096 per generation), generations (10 -> 500).")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Calls per figure (the median is shown).")
def bench_growth_cmd(out: Path, axes: str, repeats: int) -> None:
    """How status, training start-up and launch grow with tasks, shards and generations, on synthetic runs written by
    the project's own writers (OUT/growth.json, OUT/growth.png)."""
    from ..errors import AzhpcError
    from ..tools.growth import POINTS, per_item, plot_growth, run_growth

    chosen = [a.strip() for a in axes.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in POINTS]
    if unknown or not chosen:
        raise click.BadParameter(f"{axes!r}: choose from {', '.join(POINTS)}", param_hint="--axes")
    rows = run_growth(out, chosen, repeats, echo=click.echo)
    for line in per_item(rows):
        click.echo(line)
    try:
        click.echo(f"plot: {plot_growth(rows, out / 'growth.png')}")
    except AzhpcError as exc:  # matplotlib is optional: the figures stand without the plot
        click.echo(f"no plot: {exc}")


@bench.command("wide")
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@config_options("configs/tiny.yaml")
@click.option("--tasks", type=click.IntRange(min=1), default=64, show_default=True, help="Self-play tasks in the array.")
@click.option("--cpus-per-task", type=click.IntRange(min=1), default=2, show_default=True,
              help="CPUs each task asks (with the nodes' CPUs, how many run at once).")
@click.option("--every", "every_s", type=click.FloatRange(min=0.5), default=5.0, show_default=True,
              help="Seconds between status calls.")
def bench_wide_cmd(run_dir: Path, config_path: Path, overrides: tuple[str, ...], tasks: int, cpus_per_task: int,
                   every_s: float) -> None:
    """One generation of a wide self-play array on SLURM (tiny games): each task's time from its start to a ready
    network and to its first game, and how fast azhpc status answers while it runs (RUN/wide.json)."""
    from ..tools.wide import run_wide, summary

    try:
        report = run_wide(run_dir, tasks, config_path, overrides, cpus_per_task, every_s, echo=click.echo)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    for line in summary(report):
        click.echo(line)
