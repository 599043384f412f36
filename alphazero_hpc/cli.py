"""``azhpc``: a thin command line over the library. Each command parses, calls one function, renders.

Errors a user can cause become one line on stderr and exit status 1; ``AZHPC_DEBUG=1`` shows tracebacks.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import click

from .errors import AzhpcError
from .store.paths import DEFAULT_ROOT

CONFIG_HELP = "YAML config (configs/tiny.yaml, small.yaml, cluster.yaml). Env: AZHPC_CONFIG."
SET_HELP = "Override a config value, e.g. --set mcts.simulations=64 (repeatable)."


class AzhpcGroup(click.Group):
    """Turns AzhpcError and OSError into one-line messages unless AZHPC_DEBUG is set."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (AzhpcError, OSError) as exc:
            if os.environ.get("AZHPC_DEBUG"):
                raise
            if isinstance(exc, OSError):
                from .errors import describe_os_error

                exc = describe_os_error(exc, exc.filename or "", "accessing")
            raise click.ClickException(str(exc)) from None


@click.group(cls=AzhpcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="alphazero_hpc")
def main() -> None:
    """AlphaZero-style chess training on SLURM clusters, or on one machine."""


@main.command()
@click.option("--run-dir", type=click.Path(path_type=Path), required=True, envvar="AZHPC_RUN_DIR", help="Run folder. Env: AZHPC_RUN_DIR.")
@click.option("--generation", type=click.IntRange(min=0), default=0, show_default=True, help="Generation whose network plays.")
@click.option("--task", type=click.IntRange(min=0), default=0, show_default=True, help="This task's index.")
@click.option("--num-tasks", type=click.IntRange(min=1), default=1, show_default=True, help="Tasks sharing the generation's games.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), envvar="AZHPC_CONFIG", help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
@click.option("--device", default="auto", show_default=True, help="auto (CUDA, MPS, CPU), cpu, cuda, cuda:1, mps.")
def selfplay(run_dir: Path, generation: int, task: int, num_tasks: int, config_path: Path | None, overrides: tuple[str, ...], device: str) -> None:
    """Play one task's share of a generation's games and write HDF5 shards.

    Started again with the same arguments it continues after its last complete shard.
    """
    from .selfplay.task import run_selfplay_task

    p = run_selfplay_task(run_dir, generation, task, num_tasks, config_path, overrides, device)
    click.echo(f"generation {generation} task {task}/{num_tasks}: {p.games_in_shards} games, {p.positions} positions in "
               f"{p.shards_done} shards (W/D/L {p.white_wins}/{p.draws}/{p.black_wins}) -> {run_dir}")


@main.command()
@click.option("--run-dir", type=click.Path(path_type=Path), required=True, envvar="AZHPC_RUN_DIR", help="Run folder. Env: AZHPC_RUN_DIR.")
@click.option("--generation", type=click.IntRange(min=0), required=True, help="Train on the window ending at this generation; writes gen+1.")
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=1, show_default=True, help="Ranks on this machine (torchrun standalone).")
@click.option("--workers", type=click.IntRange(min=0), default=None, help="DataLoader workers per rank [default: train.loader_workers].")
def train(run_dir: Path, generation: int, nproc_per_node: int, workers: int | None) -> None:
    """Train generation G's replay window and write models/gen-(G+1).pt (resumes if interrupted)."""
    import subprocess

    args = ["--run-dir", str(run_dir), "--generation", str(generation)] + (["--workers", str(workers)] if workers is not None else [])
    if nproc_per_node == 1:
        from .train.trainer import main as train_main

        code = train_main(args)
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc_per_node}",
               "-m", "alphazero_hpc.train", *args]
        code = subprocess.run(cmd).returncode
    if code:
        raise click.exceptions.Exit(code)


@main.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), envvar="AZHPC_CONFIG", help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
@click.option("--run-dir", type=click.Path(path_type=Path), help="Run folder [default: scratch/run-DATE-TIME].")
@click.option("--generations", type=click.IntRange(min=1), help="Generations to play and train [config run.generations].")
@click.option("--cluster", type=click.Choice(["slurm", "local"]), help="Where to run [default: slurm when sinfo answers, else local].")
@click.option("--nodes", type=click.IntRange(min=1), help="Nodes per training job [slurm.nodes].")
@click.option("--gpus-per-node", type=click.IntRange(min=0), help="GPUs per node: one self-play task each [slurm.gpus_per_node].")
@click.option("--tasks", type=click.IntRange(min=1), help="Self-play tasks per generation [slurm.selfplay_tasks; default one per GPU].")
@click.option("--cpus-per-task", type=click.IntRange(min=1), help="CPUs per self-play task and per GPU of training [slurm.cpus_per_task].")
@click.option("--partition", help="SLURM partition [slurm.partition].")
@click.option("--account", help="SLURM account [slurm.account].")
@click.option("--qos", help="SLURM QOS [slurm.qos].")
@click.option("--selfplay-time", type=click.IntRange(min=1), help="Time limit of a self-play task, minutes [slurm.selfplay_time_min].")
@click.option("--train-time", type=click.IntRange(min=1), help="Time limit of a training job, minutes [slurm.train_time_min].")
@click.option("--pretrain", is_flag=True, help="First train generation 0 on the games azhpc import-pgn put in --run-dir.")
@click.option("--dry-run", is_flag=True, help="Print the sbatch scripts of the whole chain and submit nothing.")
@click.option("--wait", "wait_", is_flag=True, help="Block and show progress; exit non-zero if the run fails.")
def launch(config_path, overrides, run_dir, generations, cluster, nodes, gpus_per_node, tasks, cpus_per_task, partition,
           account, qos, selfplay_time, train_time, pretrain, dry_run, wait_) -> None:
    """Run the AlphaZero loop: per generation a self-play array (one task per GPU), then a training job.

    On SLURM the whole chain is submitted with dependencies and launch returns with the job ids; locally
    the same stages run as processes on this machine (in the background unless --wait).
    """
    from .launch.start import launch as do_launch
    from .report.follow import run_local_foreground, wait

    flags = {"run.generations": generations, "slurm.nodes": nodes, "slurm.gpus_per_node": gpus_per_node,
             "slurm.selfplay_tasks": tasks, "slurm.cpus_per_task": cpus_per_task, "slurm.partition": partition,
             "slurm.account": account, "slurm.qos": qos, "slurm.selfplay_time_min": selfplay_time,
             "slurm.train_time_min": train_time}
    overrides = tuple(overrides) + tuple(f"{k}={v}" for k, v in flags.items() if v is not None)
    res = do_launch(run_dir, config_path, overrides, cluster, dry_run=dry_run, detach=not wait_,
                    command=" ".join(["azhpc", *sys.argv[1:]]), pretrain=pretrain)
    plan = res.plan
    if dry_run:
        for what, script in res.scripts:
            click.echo(f"# ===== {what} =====\n{script}")
        click.echo(f"# dry run: {len(res.scripts)} sbatch scripts, nothing submitted (job ids 9000xx are placeholders)")
        return
    click.echo(f"run {res.paths.root}: {plan.cluster}, {'pretraining, then ' if plan.pretrain else ''}{plan.generations} "
               f"generations x ({plan.tasks} self-play tasks + training on {plan.world_size} rank(s))")
    if plan.cluster == "slurm":
        for j in res.record.jobs:
            click.echo((f"  generation {j.generation} {j.stage:8s}" if j.generation >= 0 else "  pretraining        ") + f" job {j.job_id}"
                       + (f" (tasks {j.tasks[0]}-{j.tasks[1] - 1})" if j.stage == "selfplay" else "")
                       + (f"  --dependency={j.dependency}" if j.dependency else ""))
        if not wait_:
            click.echo(f"follow it: azhpc status {res.paths.root} --watch")
            return
        ok = wait(res.paths.root, echo=click.echo)
    elif not wait_:
        click.echo(f"local supervisor pid {res.supervisor_pid} (log {res.paths.logs / 'local-supervisor.log'}); "
                   f"follow it: azhpc status {res.paths.root} --watch")
        return
    else:
        ok = run_local_foreground(res.paths.root, echo=click.echo)
    if not ok:
        raise click.ClickException(f"run {res.paths.root} did not finish: see azhpc status {res.paths.root}")
    click.echo(f"done: {res.paths.model(plan.generations)}")


@main.command("import-pgn")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--min-elo", type=click.IntRange(min=0), default=0, show_default=True, help="Keep games whose both players are rated at least this (0: any).")
@click.option("--speeds", default="", help="Keep only these Lichess speeds (from TimeControl), e.g. blitz,rapid,classical [default: any].")
@click.option("--ending", type=click.Choice(["result", "rules"]), default="result", show_default=True,
              help="result: any game with a result tag; rules: only games the rules end (mate, stalemate, draws by rule).")
@click.option("--max-games", type=click.IntRange(min=0), default=0, show_default=True, help="Import at most this many games in all (0: every game).")
@click.option("--games-per-shard", type=click.IntRange(min=1), default=100, show_default=True, help="Accepted games per shard.")
@click.option("--tasks", type=click.IntRange(min=1), default=1, show_default=True, help="Split the import: task I takes every T-th game.")
@click.option("--task", type=click.IntRange(min=0), default=None, help="Run only this task here (what each array element runs).")
@click.option("--cluster", type=click.Choice(["slurm", "local"]), help="With --tasks: a SLURM array, or processes here [default: slurm when sinfo answers].")
@click.option("--config", "config_path", type=click.Path(path_type=Path), envvar="AZHPC_CONFIG", help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
def import_pgn(run_dir: Path, files: tuple[Path, ...], min_elo: int, speeds: str, ending: str, max_games: int,
               games_per_shard: int, tasks: int, task: int | None, cluster: str | None, config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Import games from PGN files (.pgn, .pgn.gz, .pgn.bz2, .pgn.zst) into shards of RUN.

    Each position before a move becomes a training row (policy: the move played; value: the result), encoded as
    self-play's. Killed and started again with the same arguments, it continues after its last complete shard.
    Then `azhpc launch --run-dir RUN --pretrain` trains generation 0 on them before the first self-play.
    """
    from .launch.importing import import_pgn as do_import
    from .pgn.rows import SPEEDS, GameFilter
    from .pgn.task import ImportSpec

    wanted = tuple(s.strip() for s in speeds.split(",") if s.strip())
    unknown = [s for s in wanted if s not in SPEEDS]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} is not one of {', '.join(SPEEDS)}", param_hint="--speeds")
    if task is not None and task >= tasks:
        raise click.BadParameter(f"{task} is not below --tasks {tasks}", param_hint="--task")
    spec = ImportSpec.of(files, tasks, max_games, GameFilter(min_elo, wanted, ending), games_per_shard)
    res = do_import(run_dir, spec, task, cluster, config_path, overrides)
    if res.jobs:
        click.echo(f"import of {len(spec.files)} file(s) into {res.paths.root}: SLURM array job(s) {', '.join(res.jobs)} "
                   f"({spec.tasks} tasks); follow it: azhpc status {res.paths.root}")
        return
    for p in res.progress:
        rejected = ", ".join(f"{n} {why}" for why, n in sorted(p.rejected.items())) or "none"
        click.echo(f"import task {p.task}/{p.num_tasks} {p.status}: {p.games} games, {p.positions} positions in "
                   f"{p.shards_done} shards ({p.positions_per_s:.0f} positions/s); left out: {rejected}")
        if p.malformed:
            shown = "; ".join(f"game {n}: {e}" for n, e in zip(p.malformed_games[:3], p.malformed_errors[:3]))
            click.echo(f"  {p.malformed} malformed game(s) skipped ({shown}{'; ...' if p.malformed > 3 else ''})")
    if res.failed:
        raise click.ClickException("; ".join(res.failed))
    click.echo(f"shards in {res.paths.imports}; pretrain on them: azhpc launch --run-dir {res.paths.root} --pretrain")


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path), required=False)
@click.option("--watch", is_flag=True, help="Refresh in place until the run is over (Ctrl-C stops watching, not the run).")
@click.option("--interval", type=click.FloatRange(min=0.5), default=5.0, show_default=True, help="Seconds between refreshes.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status(run_dir: Path | None, watch: bool, interval: float, as_json: bool) -> None:
    """Per generation: tasks done/running/pending/failed, games, positions, games/s, losses, jobs and their states.

    RUN defaults to the newest run folder under scratch/.
    """
    import time

    from .report.status import collect, finished, render

    run_dir = run_dir or _newest_run()
    while True:
        st = collect(run_dir)
        text = json.dumps(st.to_json(), indent=1) if as_json else render(st)
        if watch and sys.stdout.isatty():
            click.echo("\x1b[H\x1b[2J" + text + f"\n(refreshing every {interval:g}s; Ctrl-C stops watching)")
        else:
            click.echo(text)
        if not watch or finished(st)[0]:
            return
        time.sleep(interval)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
def cancel(run_dir: Path) -> None:
    """Cancel every pending and running job of a run (SLURM jobs or local processes) and record it."""
    from .launch.cancel import cancel_run

    live = cancel_run(run_dir)
    click.echo(f"cancelled {len(live)} job(s){': ' + ', '.join(live) if live else ''}; complete shards and training "
               f"states stay in {run_dir}")


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--generations", type=click.IntRange(min=1), default=None, help="Extend the run to this many generations.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=None,
              help="Retry tasks and training jobs that failed fewer times than this (default: slurm.max_attempts).")
@click.option("--wait", "wait_", is_flag=True, help="Follow the run until it ends (locally: run it in the foreground).")
def resume(run_dir: Path, generations: int | None, max_attempts: int | None, wait_: bool) -> None:
    """Submit exactly the work a run is missing: failed or cancelled tasks and jobs, generations never
    submitted. Finished, pending and running work is left alone; a second resume submits nothing."""
    from .launch.resume import resume as do_resume
    from .report.follow import run_local_foreground, wait

    res = do_resume(run_dir, generations, max_attempts, detach=not wait_, command=" ".join(["azhpc", *sys.argv[1:]]))
    for j in res.submitted:
        click.echo(f"  submitted generation {j.generation} {j.stage:8s} job {j.job_id}"
                   + (f" (tasks {','.join(map(str, j.task_ids()))})" if j.stage == "selfplay" else "")
                   + (f"  --dependency={j.dependency}" if j.dependency else ""))
    if res.cancelled:
        click.echo(f"  cancelled {', '.join(res.cancelled)} (their dependencies were replaced)")
    for line in res.gave_up:
        click.echo(f"  gave up: {line}", err=True)
    if res.message:
        click.echo(res.message)
    if res.gave_up and not res.submitted:
        raise click.ClickException(f"{len(res.gave_up)} task(s)/job(s) failed too often: see above and azhpc status {run_dir}")
    if not wait_:
        if res.submitted or res.supervisor_pid:
            click.echo(f"follow it: azhpc status {run_dir} --watch")
        return
    ok = run_local_foreground(run_dir, echo=click.echo) if res.run_here else wait(run_dir, echo=click.echo)
    if not ok:
        raise click.ClickException(f"run {run_dir} did not finish: see azhpc status {run_dir}")
    click.echo(f"done: {run_dir}")


def _newest_run() -> Path:
    runs = sorted((p for p in DEFAULT_ROOT.glob("*/config.yaml")), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise click.ClickException(f"no run folder under {DEFAULT_ROOT}/: pass the run folder, e.g. azhpc status scratch/run-...")
    return runs[-1].parent


@main.command()
@click.option("--run-dir", type=click.Path(path_type=Path), default=DEFAULT_ROOT, show_default=True, help="Where runs go (checked for writing).")
def doctor(run_dir: Path) -> None:
    """Check devices (CUDA, MPS, CPU), SLURM commands, the run folder and versions."""
    from .tools.doctor import run_doctor

    for c in run_doctor(run_dir):
        click.echo(f"[{'ok' if c.ok else '--'}] {c.name:14s} {c.detail}")


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--generation", type=click.IntRange(min=0), required=True, help="Generation whose network (models/gen-G.pt) plays.")
@click.option("--opponent", "opponents", multiple=True,
              help="previous, gen:K, random, greedy, stockfish[:skill=S][,elo=E][,nodes=N|depth=D|movetime=MS|tc=BASE+INC], "
                   "fairy-stockfish[:...]; repeatable [eval.opponents].")
@click.option("--games", type=click.IntRange(min=1), help="Games per opponent [eval.games].")
@click.option("--simulations", type=click.IntRange(min=1), help="Simulations per move of the network(s) [eval.simulations, else mcts.simulations].")
@click.option("--openings", help="book (shipped balanced set) or random:K (K random plies) [eval.openings].")
@click.option("--max-plies", type=click.IntRange(min=2), help="Plies after which a game is a draw [eval.max_plies].")
@click.option("--adjudicate-material", type=click.IntRange(min=0),
              help="Score a game drawn by repetition/fifty moves/max plies as a win for a side this much material ahead [eval.adjudicate_material].")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of random/greedy players and random openings.")
@click.option("--device", default="auto", show_default=True, help="auto (CUDA, MPS, CPU), cpu, cuda, cuda:1, mps.")
@click.option("--stockfish", "stockfish_path", help="Stockfish binary [default: stockfish on PATH, or /usr/games/stockfish].")
@click.option("--fairy-stockfish", "fairy_path", help="Fairy-Stockfish binary [default: on PATH, or /usr/games/fairy-stockfish].")
@click.option("--scale", is_flag=True,
              help="Rate the network on the calibrated Stockfish 15.1 UCI_Elo scale (bracket it, then play its nearest rungs).")
@click.option("--interval", "target", type=click.FloatRange(min=1), default=75.0, show_default=True,
              help="With --scale: play until the 95% interval is at most +- this many Elo.")
@click.option("--max-games", type=click.IntRange(min=2), default=600, show_default=True, help="With --scale: stop after this many games.")
@click.option("--scale-table", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="With --scale: a scale table of azhpc ladder fit (default: the one shipped with azhpc).")
@click.option("--quiet", is_flag=True, help="Only the result lines, not one line per game.")
def evaluate(run_dir: Path, generation: int, opponents: tuple[str, ...], games: int | None, simulations: int | None,
             openings: str | None, max_plies: int | None, adjudicate_material: int | None, seed: int, device: str,
             stockfish_path: str | None, fairy_path: str | None, scale: bool, target: float, max_games: int,
             scale_table: Path | None, quiet: bool) -> None:
    """Play generation G's network against opponents; W/D/L, Elo with a 95% interval and LOS.

    Each match is appended to RUN/eval/ledger.jsonl and its games saved as PGN under RUN/eval/. A match already
    in the ledger (same players, games, simulations, openings, seed) is shown, not played again. With --scale the
    opponents are the rungs of the calibrated scale (docs/evaluation.md) and the result is one rating on it.
    """
    from .config import split_opponents
    from .evaluate.runner import describe
    from .evaluate.runner import evaluate as run_match
    from .store.paths import RunPaths
    from .store.runconfig import read_run_config

    cfg = read_run_config(RunPaths(run_dir))
    if scale:
        from .evaluate.scale import ANCHOR_NOTE, rate_on_scale

        rating = rate_on_scale(run_dir, cfg, generation, target, max_games=max_games, simulations=simulations,
                               device=device, engines={"stockfish": stockfish_path, "fairy-stockfish": fairy_path},
                               table=scale_table, echo=(lambda s: None) if quiet else click.echo)
        click.echo(rating.line())
        click.echo(f"({ANCHOR_NOTE})")
        return
    failed = []
    for spec in opponents or split_opponents(cfg.eval.opponents):
        try:
            entry, played = run_match(run_dir, cfg, generation, spec, games, simulations, openings, seed, max_plies,
                                      device, stockfish_path, adjudicate_material,
                                      echo=(lambda s: None) if quiet else click.echo, fairy_stockfish=fairy_path)
        except AzhpcError as exc:  # one opponent failing (stockfish missing) does not stop the others
            click.echo(f"azhpc: {exc}", err=True)
            failed.append(spec)
            continue
        click.echo(describe(entry) + ("" if played else "  (already in the ledger)"))
    if failed:
        raise click.ClickException(f"{len(failed)} of the opponents could not be played: {', '.join(failed)}")


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--anchor", default="random", show_default=True, help="Player pinned at Elo 0.")
@click.option("--adjudicate-material", type=click.IntRange(min=0), default=0, show_default=True,
              help="Fit the matches scored with this material adjudication (0: chess rules only).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--scale/--no-scale", default=None,
              help="Rate on the calibrated Stockfish 15.1 UCI_Elo scale (the rungs pinned at their ratings) "
                   "[default: when the ledger has matches against rungs].")
@click.option("--scale-table", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A scale table of azhpc ladder fit [default: the one shipped with azhpc].")
def elo(run_dir: Path, anchor: str, adjudicate_material: int, as_json: bool, scale: bool | None,
        scale_table: Path | None) -> None:
    """Ratings of every evaluated generation and opponent of a run, with 95% intervals (RUN/eval/ratings.json)."""
    from .evaluate.ladder import run_ladder

    table, entries, on_scale = run_ladder(run_dir, anchor, adjudicate_material, scale=scale, table=scale_table)
    if on_scale:
        from .evaluate.scale import ANCHOR_NOTE, SCALE_NAME

        anchor_line = f"on the {SCALE_NAME} ({ANCHOR_NOTE}); rungs pinned at their calibrated ratings"
    else:
        anchor_line = f"{anchor} = 0; ratings are relative to it (a ladder, not FIDE Elo)"
    if as_json:
        click.echo(json.dumps({"anchor": anchor, "scale": on_scale, "ratings": [r.__dict__ for r in table]}, indent=1))
        return
    click.echo(f"{'player':<28} {'Elo':>7}  {'95% interval':>17}  {'games':>6}")
    for r in table:
        if r.elo is None:
            click.echo(f"{r.name:<28} {'?':>7}  {'(no path to ' + anchor + ')':>17}  {r.games:>6}")
        else:
            click.echo(f"{r.name:<28} {r.elo:>+7.0f}  [{r.low:>+6.0f}, {r.high:>+6.0f}]  {r.games:>6}")
    click.echo(f"{len(entries)} matches; {anchor_line}")


@main.command()
@click.option("--checkpoint", type=click.Path(path_type=Path), required=True, help="Network to play, e.g. RUN/models/gen-0010.pt.")
@click.option("--simulations", type=click.IntRange(min=1), default=200, show_default=True,
              help="Simulations per move when go gives no limit (go nodes/movetime/wtime override it).")
@click.option("--movetime", "movetime_ms", type=click.IntRange(min=1), help="Milliseconds per move when go gives no limit.")
@click.option("--device", default="auto", show_default=True, help="auto (CUDA, MPS, CPU), cpu, cuda, cuda:1, mps.")
def uci(checkpoint: Path, simulations: int, movetime_ms: int | None, device: str) -> None:
    """Speak UCI on stdin/stdout: any chess GUI or match runner can play the network."""
    from .evaluate.uci import run_uci

    run_uci(checkpoint, simulations, movetime_ms, device)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--adjudicate-material", type=click.IntRange(min=0), default=0, show_default=True,
              help="Plot the ladder of the matches scored with this material adjudication (0: chess rules only).")
def plot(run_dir: Path, adjudicate_material: int) -> None:
    """PNG figures in RUN/plots: Elo per generation and per compute hour, losses, game statistics (needs matplotlib).

    RUN may also be the folder of ``azhpc bench learning``: then one figure of Elo per CPU-hour for every arm."""
    from .report.plot import plot_benchmark, plot_run
    from .store.paths import BenchmarkPaths

    if BenchmarkPaths(run_dir).summary.exists():
        click.echo(f"wrote {plot_benchmark(run_dir)}")
        return
    for path in plot_run(run_dir, adjudicate_material):
        click.echo(f"wrote {path}")


@main.group()
def ladder() -> None:
    """The calibrated rating scale: its rungs, their calibration and the shipped table (docs/evaluation.md)."""


@ladder.command("show")
@click.option("--table", type=click.Path(path_type=Path, exists=True, dir_okay=False), help="A table of azhpc ladder fit [default: the shipped one].")
def ladder_show(table: Path | None) -> None:
    """Print the scale: every rung, its rating and 95% interval, and what it rests on."""
    from .evaluate.scale import render_table

    click.echo(render_table(table))


@ladder.command("calibrate")
@click.argument("out_dir", metavar="OUT", type=click.Path(path_type=Path))
@click.option("--tasks", type=click.IntRange(min=1), default=2, show_default=True, help="Calibration processes at once.")
@click.option("--games", type=click.IntRange(min=2), default=400, show_default=True,
              help="Games per adjacent pair of untimed rungs (next-adjacent pairs play half).")
@click.option("--timed-games", type=click.IntRange(min=2), default=100, show_default=True,
              help="Games per adjacent pair with a timed rung (movetime, clock); next-adjacent pairs play half.")
@click.option("--rung", "rungs", multiple=True, help="Calibrate only these rungs, weakest first (repeatable) [default: the scale's].")
@click.option("--cluster", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="local: --tasks processes here, waited for; slurm: an array of --tasks one-CPU tasks, submitted.")
@click.option("--time-min", type=click.IntRange(min=1), default=240, show_default=True, help="With --cluster slurm: each task's time limit.")
@click.option("--partition", default="", help="With --cluster slurm: the partition.")
@click.option("--account", default="", help="With --cluster slurm: the account.")
@click.option("--qos", default="", help="With --cluster slurm: the QOS.")
@click.option("--stockfish", "stockfish_path", help="Stockfish binary [default: stockfish on PATH, or /usr/games/stockfish].")
@click.option("--fairy-stockfish", "fairy_path", help="Fairy-Stockfish binary [default: on PATH, or /usr/games/fairy-stockfish].")
def ladder_calibrate(out_dir: Path, tasks: int, games: int, timed_games: int, rungs: tuple[str, ...], cluster: str,
                     time_min: int, partition: str, account: str, qos: str, stockfish_path: str | None,
                     fairy_path: str | None) -> None:
    """Play the matches between rungs (adjacent and next-adjacent pairs) into OUT/eval/ledger.jsonl, then fit.

    Started again it plays only the blocks still missing. Timed rungs (movetime, the anchor's clock) play weaker on a
    busy machine: calibrate on a quiet one (each match records the load average)."""
    from .evaluate.scale import RUNGS, CalibrationSpec, calibrate, fit_scale, render_table, submit_calibration, write_fit

    spec = CalibrationSpec(games, timed_games, rungs=rungs or RUNGS)
    engines = {"stockfish": stockfish_path, "fairy-stockfish": fairy_path}
    if cluster == "slurm":
        job = submit_calibration(out_dir, spec, tasks, engines, time_min, partition, account, qos)
        click.echo(f"calibration array {job} ({tasks} tasks) submitted; when it is done: azhpc ladder fit {out_dir} "
                   "(submit again to continue one that was stopped)")
        return
    failed = calibrate(out_dir, spec, tasks, engines, click.echo)
    where = write_fit(out_dir, fit_scale(out_dir))
    click.echo(render_table(where))
    if failed:
        raise click.ClickException("; ".join(failed))


@ladder.command("fit")
@click.argument("out_dir", metavar="OUT", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--freeze", is_flag=True, help="Also write the table into the installed package (a developer's step before a release).")
def ladder_fit(out_dir: Path, freeze: bool) -> None:
    """Fit every rung jointly over OUT's calibration matches (anchor at 1350) into OUT/scale.json."""
    from .evaluate.scale import fit_scale, freeze as freeze_table, render_table, write_fit

    table = fit_scale(out_dir)
    where = write_fit(out_dir, table)
    click.echo(render_table(where))
    if freeze:
        click.echo(f"frozen into {freeze_table(table)}")


@main.group()
def bench() -> None:
    """Benchmarks that print their figures."""


@bench.command("selfplay")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("configs/small.yaml"), show_default=True, help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
@click.option("--seconds", type=click.FloatRange(min=1), default=30.0, show_default=True, help="Measured window.")
@click.option("--device", default="auto", show_default=True)
@click.option("--workers", default="0", show_default=True, metavar="K[,K...]",
              help="Search processes sharing the network (0: one process does both); a list measures each in turn.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Measure the --workers values this many times, alternating; each value's median run is shown.")
@click.option("--evaluator", type=click.Choice(["network", "uniform"]), default="network", show_default=True,
              help="uniform: a free evaluator (no network), to measure the search and the transport alone.")
@click.option("--vary", default=None, metavar="SECTION.KEY=V1,V2[,...]",
              help="Measure each value of one config key in turn (an A/B in one run), e.g. mcts.lazy_rows=0,4096.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_selfplay_cmd(config_path: Path, overrides: tuple[str, ...], seconds: float, device: str, workers: str,
                       repeat: int, evaluator: str, vary: str | None, as_json: bool) -> None:
    """Self-play speed against the raw network at the same batch size, in one run.

    With several --workers values (or --vary values) the runs follow each other in this process (with --repeat,
    alternating, so that a shared machine's drift hits every value alike) and the last lines compare their
    simulations/s and CPU per simulation with the first value's.
    """
    from .tools.bench import bench_selfplay
    from .config import load_config

    try:
        ks = list(dict.fromkeys(int(k) for k in workers.split(",")))
        if min(ks) < 0:
            raise ValueError
    except ValueError:
        raise click.BadParameter(f"{workers!r}: give worker counts >= 0 separated by commas, e.g. 1,2", param_hint="--workers")
    variants: list[tuple[str, tuple[str, ...]]] = [("", overrides)]
    if vary:
        key, _, values = vary.partition("=")
        if not key or not values:
            raise click.BadParameter(f"{vary!r}: give SECTION.KEY=V1,V2, e.g. mcts.lazy_rows=0,4096", param_hint="--vary")
        variants = [(f"{key}={v}", (*overrides, f"{key}={v}")) for v in dict.fromkeys(values.split(","))]
        if len(ks) > 1:
            raise click.BadParameter("give one --workers value with --vary", param_hint="--vary")
    cfgs = [load_config(config_path, o) for _, o in variants]
    ev = None
    if evaluator == "uniform":
        from .search.fakes import UniformEvaluator

        ev = UniformEvaluator(cfgs[0].model.history)
    arms = [(f"{k} workers" if not vary else name, k, cfg) for k in ks for (name, _), cfg in zip(variants, cfgs)]
    runs: dict[str, list] = {a: [] for a, _, _ in arms}
    for _ in range(repeat):
        for a, k, cfg in arms:
            runs[a].append(bench_selfplay(cfg, str(config_path), device, seconds, workers=k, evaluator=ev))
    results = {a: sorted(runs[a], key=lambda r: r.simulations_per_s)[(repeat - 1) // 2] for a in runs}
    first = arms[0][0]
    speedup = {a: r.simulations_per_s / results[first].simulations_per_s for a, r in results.items()}
    if as_json:
        only = len(results) == 1 and repeat == 1
        out = results[first].to_dict() if only else {
            "medians": [r.to_dict() for r in results.values()],
            f"simulations_per_s_over_{first.replace(' ', '_')}": speedup,
            "simulations_per_s_every_run": {a: [r.simulations_per_s for r in runs[a]] for a in runs},
            "cpu_us_per_simulation_outside_network_every_run":
                {a: [r.cpu_us_per_simulation_outside_network for r in runs[a]] for a in runs}}
        if not vary and not only:  # the names scripts already read
            out[f"simulations_per_s_over_workers_{ks[0]}"] = {str(r.workers): speedup[a] for a, r in results.items()}
            out["simulations_per_s_every_run"] = {str(k): [r.simulations_per_s for r in runs[f"{k} workers"]] for k in ks}
        click.echo(json.dumps(out, indent=1))
        return
    click.echo("\n\n".join((f"[{a}]\n" if vary else "") + r.render() for a, r in results.items()))
    if repeat > 1:
        click.echo("")
        for a in runs:
            cpu = [r.cpu_us_per_simulation_outside_network for r in runs[a]]
            click.echo(f"{a}, every run: simulations/s " + ", ".join(f"{r.simulations_per_s:.0f}" for r in runs[a])
                       + ("; CPU us/sim outside net " + ", ".join(f"{c:.1f}" for c in cpu) if None not in cpu else ""))
    if len(results) > 1:
        click.echo("")
        for a, r in list(results.items())[1:]:
            line = f"simulations/s with {a} / with {first}: {speedup[a]:.2f}x"
            c0, c1 = (_median_cpu(runs[first]), _median_cpu(runs[a]))  # medians of their own (runs[a][i] is one run)
            if c0 and c1:
                line += f"; CPU us/sim outside net {c1 / c0:.2f}x (medians {c1:.1f} / {c0:.1f})"
            click.echo(line)


def _median_cpu(runs: list) -> float | None:
    cpu = [r.cpu_us_per_simulation_outside_network for r in runs]
    return None if None in cpu else statistics.median_low(cpu)


@bench.command("shards")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("configs/small.yaml"), show_default=True, help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
@click.option("--games", type=click.IntRange(min=1), default=64, show_default=True, help="Games in the shard.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_shards_cmd(config_path: Path, overrides: tuple[str, ...], games: int, as_json: bool) -> None:
    """Shard bytes per position and read/write speed for each compression (lc0's V6 record: 8,356 bytes)."""
    from .tools.bench import bench_shards
    from .config import load_config

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
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("configs/small.yaml"), show_default=True, help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
@click.option("--workers", type=click.IntRange(min=0), default=2, show_default=True, help="DataLoader workers.")
@click.option("--steps", type=click.IntRange(min=10), default=60, show_default=True, help="Steps of the real run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_train_cmd(config_path: Path, overrides: tuple[str, ...], workers: int, steps: int, as_json: bool) -> None:
    """Trainer samples/s, data loader samples/s alone, and the share of step time spent waiting for data."""
    from .tools.bench import bench_train
    from .config import load_config

    r = bench_train(load_config(config_path, overrides), workers, steps)
    if as_json:
        click.echo(json.dumps(r, indent=1))
        return
    click.echo(f"batch {r['batch_size']}, {r['positions']} positions, {r['loader_workers']} loader workers")
    click.echo(f"trainer alone          {r['trainer_samples_per_s']:10.0f} samples/s")
    click.echo(f"loader alone           {r['loader_samples_per_s']:10.0f} samples/s  ({r['loader_over_trainer']:.1f}x the trainer)")
    click.echo(f"real run               {r['real_run_samples_per_s']:10.0f} samples/s, waiting for data {r['real_run_data_wait_share']:.1%} of step time")


@bench.command("import-pgn")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("configs/small.yaml"), show_default=True, help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Alternating runs of each.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_import_cmd(files: tuple[Path, ...], config_path: Path, overrides: tuple[str, ...], repeats: int, as_json: bool) -> None:
    """Import positions/s against python-chess's own parse rate of the same files, in one run."""
    from .tools.pgnbench import bench_import

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
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("configs/learn.yaml"), show_default=True, help=CONFIG_HELP)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP)
@click.option("--eval-games", type=click.IntRange(min=2), default=40, show_default=True, help="Games against each opponent.")
@click.option("--simulations", type=click.IntRange(min=1), default=None, help="Simulations per move [eval.simulations].")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Stockfish processes and training threads [the cores].")
@click.option("--stockfish", "stockfish_path", help="Stockfish binary [default: stockfish on PATH, or /usr/games/stockfish].")
def bench_pretrain_cmd(out_dir: Path, games: int, depth: int, epochs: float, config_path: Path, overrides: tuple[str, ...],
                       eval_games: int, simulations: int | None, workers: int | None, stockfish_path: str | None) -> None:
    """Learning check of import-pgn: Stockfish games -> import -> pretraining -> matches against random and greedy
    under the rules of chess (in OUT/run/eval/ledger.jsonl)."""
    from .evaluate.engines import find_stockfish
    from .tools.pgnbench import learning_check

    learning_check(out_dir, find_stockfish(stockfish_path), games, depth, config_path, (f"pretrain.epochs={epochs}", *overrides),
                   eval_games, simulations or 0,
                   workers=workers or len(os.sched_getaffinity(0)), echo=click.echo)


@bench.command("learning")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("configs/learn.yaml"), show_default=True, help=CONFIG_HELP)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("scratch/learning"), show_default=True,
              help="Benchmark folder: one run folder per arm, benchmark.json, ladder.json (started again, it continues).")
@click.option("--budget-cpu-hours", type=click.FloatRange(min=0.001), default=1.0, show_default=True,
              help="CPU time of self-play and training per arm (every process the arm starts).")
@click.option("--arms", default="puct,gumbel8,gumbel8-q,gumbel16,gumbel16-q", show_default=True,
              help="Comma list of: puct (24 simulations), gumbel8, gumbel8-q, gumbel16, gumbel16-q (-q: train.value_target_q_ratio=0.5), "
                   "4x64-bf16 (gumbel16-q with a 4x64 net, 64 games in flight, bf16 search and training).")
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
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help=SET_HELP + " Applies to every arm.")
def bench_learning_cmd(config_path: Path, out_dir: Path, budget_cpu_hours: float, arms: str, games: int,
                       ladder_games: int, ladder_every: int, stockfish_nodes: int, scale: bool, device: str,
                       overrides: tuple[str, ...]) -> None:
    """Arms of search (PUCT; Gumbel at 8 and 16 simulations, with and without q-mixing) side by side on one CPU
    budget each, then one Elo ladder of every network against random, greedy and Stockfish (chess rules only),
    on the calibrated Stockfish 15.1 UCI_Elo scale with --scale."""
    from .tools.learning import render, run_benchmark

    result, ladder = run_benchmark(out_dir, config_path, [a.strip() for a in arms.split(",") if a.strip()],
                                   budget_cpu_hours, games, ladder_games, stockfish_nodes, device, overrides, click.echo,
                                   ladder_every, scale)
    click.echo(render(result, ladder))
    click.echo(f"ladder in {out_dir / 'ladder.json'}; azhpc plot {out_dir} draws Elo per CPU-hour")


def run() -> None:  # pragma: no cover
    main(prog_name="azhpc")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
