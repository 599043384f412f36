"""Commands that make, run and watch a run: selfplay, train, average, launch, import-pgn, status, cancel, resume, doctor."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..store.paths import DEFAULT_ROOT, newest_run
from .app import main
from .options import config_options, renamed


@main.command()
@click.argument("run_dir", metavar="RUN", required=False, type=click.Path(path_type=Path))
@renamed("--run-dir", "the positional RUN", "run_dir", type=click.Path(path_type=Path), envvar="AZHPC_RUN_DIR")
@click.option("--generation", type=click.IntRange(min=0), default=0, show_default=True, help="Generation whose network plays.")
@click.option("--task", type=click.IntRange(min=0), default=0, show_default=True, help="This task's index.")
@click.option("--num-tasks", type=click.IntRange(min=1), default=1, show_default=True, help="Tasks sharing the generation's games.")
@config_options()
@click.option("--device", default="auto", show_default=True, help="auto (CUDA, MPS, CPU), cpu, cuda, cuda:1, mps.")
def selfplay(run_dir: Path, generation: int, task: int, num_tasks: int, config_path: Path | None, overrides: tuple[str, ...], device: str) -> None:
    """Play one task's share of a generation's games and write HDF5 shards into RUN.

    Started again with the same arguments it continues after its last complete shard.
    """
    from ..selfplay.task import run_selfplay_task

    run_dir = _need_run(run_dir, "selfplay")
    p = run_selfplay_task(run_dir, generation, task, num_tasks, config_path, overrides, device)
    click.echo(f"generation {generation} task {task}/{num_tasks}: {p.games_in_shards} games, {p.positions} positions in "
               f"{p.shards_done} shards (W/D/L {p.white_wins}/{p.draws}/{p.black_wins}) -> {run_dir}")


@main.command()
@click.argument("run_dir", metavar="RUN", required=False, type=click.Path(path_type=Path))
@renamed("--run-dir", "the positional RUN", "run_dir", type=click.Path(path_type=Path), envvar="AZHPC_RUN_DIR")
@click.option("--generation", type=click.IntRange(min=0), required=True, help="Train on the window ending at this generation; writes gen+1.")
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=1, show_default=True, help="Ranks on this machine (torchrun standalone).")
@click.option("--loader-workers", "workers", type=click.IntRange(min=0), default=None,
              help="DataLoader worker processes per rank [default: train.loader_workers].")
@renamed("--workers", "--loader-workers", "workers", type=click.IntRange(min=0))
def train(run_dir: Path, generation: int, nproc_per_node: int, workers: int | None) -> None:
    """Train generation G's replay window of RUN and write models/gen-(G+1).pt (resumes if interrupted)."""
    import subprocess

    run_dir = _need_run(run_dir, "train")
    args = ["--run-dir", str(run_dir), "--generation", str(generation)] + (["--workers", str(workers)] if workers is not None else [])
    if nproc_per_node == 1:
        from ..train.trainer import main as train_main

        code = train_main(args)
    else:
        from ..launch.stages import torchrun_command, torchrun_logs

        with torchrun_logs() as logs:
            cmd = torchrun_command(str(run_dir), generation, nproc_per_node, None, log_dir=logs)
            code = subprocess.run(cmd + (["--workers", str(workers)] if workers is not None else [])).returncode
    if code:
        raise click.exceptions.Exit(code)


@main.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@click.option("--generation", type=click.IntRange(min=1), required=True, help="The newest generation averaged.")
@click.option("--last", type=click.IntRange(min=2), required=True, help="How many generations, up to --generation.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="New run folder: RUN's config and models/gen-G.pt, the average.")
@click.option("--bn-positions", type=click.IntRange(min=256), default=8192, show_default=True,
              help="Positions of the replay window the batch-norm statistics are measured on.")
def average(run_dir: Path, generation: int, last: int, out_dir: Path, bn_positions: int) -> None:
    """Average the weights of RUN's last --last networks up to generation G into OUT/models/gen-G.pt (SWA).

    The batch norms are measured again on the window that generation G trained on; RUN is only read.
    `azhpc evaluate OUT --generation G` rates the average like any network.
    """
    from ..train.average import average_generations

    done = average_generations(run_dir, generation, last, out_dir, bn_positions, echo=click.echo)
    click.echo(f"generations {done.generations[0]}-{done.generations[-1]} of {run_dir} averaged "
               f"({done.bn_positions} positions for the batch norms) -> {done.path}")


@main.command()
@config_options()
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
    from ..launch.start import launch as do_launch
    from ..report.follow import run_local_foreground, wait

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
        click.echo(f"# window: {res.window}; each training job submits the generations that fit after it")
        return
    click.echo(f"run {res.paths.root}: {plan.cluster}, {'pretraining, then ' if plan.pretrain else ''}{plan.generations} "
               f"generations x ({plan.tasks} self-play tasks + training on {plan.world_size} rank(s))")
    if plan.cluster == "slurm":
        assert res.record is not None  # a launch that submitted records its jobs
        for j in res.record.jobs:
            click.echo((f"  generation {j.generation} {j.stage:8s}" if j.generation >= 0 else "  pretraining        ") + f" job {j.job_id}"
                       + (f" (tasks {j.tasks[0]}-{j.tasks[1] - 1})" if j.stage == "selfplay" else "")
                       + (f"  --dependency={j.dependency}" if j.dependency else ""))
        if len({j.generation for j in res.record.jobs if j.stage == "train"}) < plan.generations:
            click.echo(f"  submitted: {res.window}; each training job submits the generations that fit after it")
        if not wait_:
            click.echo(f"follow it: azhpc status {res.paths.root} --watch")
            return
        ok = wait(res.paths.root, echo=click.echo)
    elif not wait_:
        click.echo(f"local supervisor pid {res.supervisor_pid} (log {res.paths.supervisor_log}); "
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
@config_options()
def import_pgn(run_dir: Path, files: tuple[Path, ...], min_elo: int, speeds: str, ending: str, max_games: int,
               games_per_shard: int, tasks: int, task: int | None, cluster: str | None, config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Import games from PGN files (.pgn, .pgn.gz, .pgn.bz2, .pgn.zst) into shards of RUN.

    Each position before a move becomes a training row (policy: the move played; value: the result), encoded as
    self-play's. Killed and started again with the same arguments, it continues after its last complete shard.
    Then `azhpc launch --run-dir RUN --pretrain` trains generation 0 on them before the first self-play.
    """
    from ..launch.importing import import_pgn as do_import
    from ..pgn.rows import SPEEDS, GameFilter
    from ..pgn.task import ImportSpec

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

    from ..report.render import render
    from ..report.status import collect, finished

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
    from ..launch.cancel import cancel_run

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
    from ..launch.resume import resume as do_resume
    from ..report.follow import run_local_foreground, wait

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
    run = newest_run()
    if run is None:
        raise click.ClickException(f"no run folder under {DEFAULT_ROOT}/: pass the run folder, e.g. azhpc status scratch/run-...")
    return run


@main.command()
@click.option("--runs-root", "run_dir", type=click.Path(path_type=Path), default=DEFAULT_ROOT, show_default=True,
              help="The folder that holds run folders (checked for writing).")
@renamed("--run-dir", "--runs-root", "run_dir", type=click.Path(path_type=Path))
def doctor(run_dir: Path) -> None:
    """Check devices (CUDA, MPS, CPU), SLURM commands, the run folder and versions."""
    from ..tools.doctor import run_doctor

    for c in run_doctor(run_dir):
        click.echo(f"[{'ok' if c.ok else '--'}] {c.name:14s} {c.detail}")


def _need_run(run_dir: Path | None, command: str) -> Path:
    if run_dir is None:
        raise click.UsageError(f"give the run folder: azhpc {command} RUN ...")
    return run_dir
