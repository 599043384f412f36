"""Commands that rate networks: evaluate, elo, uci, plot and the calibrated ladder."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..config import POLICY_TEMPERATURES
from ..errors import AzhpcError
from .app import main

_policy_temperature = click.option(
    "--policy-temperature", type=click.FloatRange(*POLICY_TEMPERATURES),
    help="The network's priors = softmax(logits / T) at play [eval.policy_temperature, else mcts.policy_temperature].")
_tree_reuse = click.option(
    "--tree-reuse/--no-tree-reuse", default=None,
    help="Keep each game's tree between the network's moves: a move adds its simulations to the visits its "
         "position already had [eval.tree_reuse].")


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--generation", type=click.IntRange(min=0), required=True, help="Generation whose network (models/gen-G.pt) plays.")
@click.option("--opponent", "opponents", multiple=True,
              help="previous, gen:K, random, greedy, stockfish[:skill=S][,elo=E][,nodes=N|depth=D|movetime=MS|tc=BASE+INC], "
                   "fairy-stockfish[:...]; repeatable [eval.opponents].")
@click.option("--games", type=click.IntRange(min=1), help="Games per opponent [eval.games].")
@click.option("--simulations", type=click.IntRange(min=1), help="Simulations per move of the network(s) [eval.simulations, else mcts.simulations].")
@click.option("--openings", help="book (shipped balanced set) or random:K (K random plies) [eval.openings].")
@click.option("--search", type=click.Choice(["same", "puct", "gumbel"]),
              help="The network's search in these games: same (mcts.algorithm), puct or gumbel [eval.algorithm].")
@_policy_temperature
@_tree_reuse
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
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --scale: blocks played at once, each in its own process with its share of the cores "
                   "(at most one per core: a timed rung on a loaded machine plays weaker).")
@click.option("--scale-table", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="With --scale: a scale table of azhpc ladder fit (default: the one shipped with azhpc).")
@click.option("--quiet", is_flag=True, help="Only the result lines, not one line per game.")
def evaluate(run_dir: Path, generation: int, opponents: tuple[str, ...], games: int | None, simulations: int | None,
             openings: str | None, search: str | None, policy_temperature: float | None, tree_reuse: bool | None, max_plies: int | None, adjudicate_material: int | None, seed: int, device: str,
             stockfish_path: str | None, fairy_path: str | None, scale: bool, target: float, max_games: int,
             jobs: int, scale_table: Path | None, quiet: bool) -> None:
    """Play generation G's network against opponents; W/D/L, Elo with a 95% interval and LOS.

    Each match is appended to RUN/eval/ledger.jsonl and its games saved as PGN under RUN/eval/. A match already
    in the ledger (same players, games, simulations, openings, seed) is shown, not played again. With --scale the
    opponents are the rungs of the calibrated scale (docs/evaluation.md) and the result is one rating on it.
    """
    from ..config import split_opponents
    from ..evaluate.runner import describe
    from ..evaluate.runner import evaluate as run_match
    from ..store.paths import RunPaths
    from ..store.runconfig import read_run_config

    if jobs > 1 and not scale:
        raise click.UsageError("--jobs plays the blocks of a --scale rating at once: add --scale, or leave --jobs out")
    cfg = read_run_config(RunPaths(run_dir)).playing(search, policy_temperature, tree_reuse)
    if scale:
        from ..evaluate.scale import ANCHOR_NOTE, rate_on_scale

        rating = rate_on_scale(run_dir, cfg, generation, target, max_games=max_games, simulations=simulations,
                               device=device, engines={"stockfish": stockfish_path, "fairy-stockfish": fairy_path},
                               table=scale_table, echo=(lambda s: None) if quiet else click.echo, jobs=jobs,
                               per_game=not quiet)
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
    from ..evaluate.ladder import run_ladder

    table, entries, on_scale = run_ladder(run_dir, anchor, adjudicate_material, scale=scale, table=scale_table)
    if on_scale:
        from ..evaluate.scale import ANCHOR_NOTE, SCALE_NAME

        anchor_line = f"on the {SCALE_NAME} ({ANCHOR_NOTE}); rungs pinned at their calibrated ratings"
    else:
        anchor_line = f"{anchor} = 0; ratings are relative to it (a ladder, not FIDE Elo)"
    if as_json:
        click.echo(json.dumps({"anchor": anchor, "scale": on_scale, "ratings": [r.__dict__ for r in table]}, indent=1))
        return
    w = max([28, *(len(r.name) for r in table)])  # rung names are 32 characters: the columns stay aligned
    click.echo(f"{'player':<{w}} {'Elo':>7}  {'95% interval':>17}  {'games':>6}")
    for r in table:
        if r.elo is None:
            click.echo(f"{r.name:<{w}} {'?':>7}  {'(no path to ' + anchor + ')':>17}  {r.games:>6}")
        else:
            click.echo(f"{r.name:<{w}} {r.elo:>+7.0f}  [{r.low:>+6.0f}, {r.high:>+6.0f}]  {r.games:>6}")
    click.echo(f"{len(entries)} matches; {anchor_line}")


@main.command()
@click.argument("run_dirs", metavar="RUN...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--tag", default="", help="The play setting, as azhpc elo names it after '@' (e.g. puct800,T=3,reuse) "
                                         "[default: each run's own search].")
@click.option("--generation", type=click.IntRange(min=0), help="This generation of every run [default: each run's last rated one].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--scale-table", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A scale table of azhpc ladder fit [default: the one shipped with azhpc].")
def seeds(run_dirs: tuple[Path, ...], tag: str, generation: int | None, as_json: bool, scale_table: Path | None) -> None:
    """The runs of one recipe (one per seed) on the calibrated scale: each run's rating, their mean with its 95%
    interval, and where one more run should land."""
    from ..evaluate.scale import ANCHOR_NOTE, SCALE_NAME
    from ..evaluate.seeds import rate_runs

    s = rate_runs(list(run_dirs), tag, generation, scale_table)
    low, high = s.mean_interval_calibrated
    if as_json:
        click.echo(json.dumps({"scale": SCALE_NAME, "tag": tag, **{k: v for k, v in s.__dict__.items() if k != "runs"},
                               "mean_low_calibrated": low, "mean_high_calibrated": high,
                               "runs": [{**r.__dict__, "run": str(r.run)} for r in s.runs]}, indent=1))
        return
    w = max(len(str(r.run)) for r in s.runs)
    p = max(len(r.player) for r in s.runs)
    click.echo(f"{'run':<{w}}  {'player':<{p}} {'Elo':>6}  {'95% interval':>14}  {'games':>5}")
    for r in s.runs:
        click.echo(f"{str(r.run):<{w}}  {r.player:<{p}} {r.elo:>6.0f}  [{r.low:>5.0f}, {r.high:>5.0f}]  {r.games:>5}")
    click.echo(f"{len(s.runs)} runs: mean {s.mean:.0f}, standard deviation {s.sd:.0f}; the mean's 95% interval "
               f"[{s.mean_low:.0f}, {s.mean_high:.0f}] from the runs' spread (Student's t, {s.df} degrees of freedom), "
               f"[{low:.0f}, {high:.0f}] with the rungs' calibration (+-{s.calibration_half:.0f}, shared by every run)")
    click.echo(f"one more run: [{s.next_low:.0f}, {s.next_high:.0f}] (95% prediction); spread between runs beyond "
               f"their games' own error ~{s.between_sd:.0f}")
    click.echo(f"(on the {SCALE_NAME}, {ANCHOR_NOTE})")


@main.command()
@click.option("--checkpoint", type=click.Path(path_type=Path), required=True, help="Network to play, e.g. RUN/models/gen-0010.pt.")
@click.option("--simulations", type=click.IntRange(min=1),
              help="Simulations per move, also under a clock or movetime, which can only end a search sooner (go nodes "
                   "N replaces it for one move). Without it a clock or movetime alone decides, and a go with no limit "
                   "searches 200.")
@click.option("--movetime", "movetime_ms", type=click.IntRange(min=1), help="Milliseconds per move when go gives no limit.")
@click.option("--device", default="auto", show_default=True, help="auto (CUDA, MPS, CPU), cpu, cuda, cuda:1, mps.")
@click.option("--search", type=click.Choice(["same", "puct", "gumbel"]),
              help="The network's search: same (mcts.algorithm), puct or gumbel [eval.algorithm of its run].")
@_policy_temperature
@_tree_reuse
def uci(checkpoint: Path, simulations: int | None, movetime_ms: int | None, device: str, search: str | None,
        policy_temperature: float | None, tree_reuse: bool | None) -> None:
    """Speak UCI on stdin/stdout: any chess GUI or match runner can play the network."""
    from ..evaluate.uci import run_uci

    run_uci(checkpoint, simulations, movetime_ms, device, search=search, policy_temperature=policy_temperature,
            tree_reuse=tree_reuse)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--adjudicate-material", type=click.IntRange(min=0), default=0, show_default=True,
              help="Plot the ladder of the matches scored with this material adjudication (0: chess rules only).")
def plot(run_dir: Path, adjudicate_material: int) -> None:
    """PNG figures in RUN/plots: Elo per generation and per compute hour, losses, game statistics (needs matplotlib).

    RUN may also be the folder of ``azhpc bench learning``: then one figure of Elo per CPU-hour for every arm."""
    from ..report.plot import plot_benchmark, plot_run
    from ..store.paths import BenchmarkPaths

    if BenchmarkPaths(run_dir).summary.exists():
        click.echo(f"wrote {plot_benchmark(run_dir)}")
        return
    for path in plot_run(run_dir, adjudicate_material):
        click.echo(f"wrote {path}")


@main.group()
def ladder() -> None:
    """The calibrated rating scale: its rungs, their calibration and the shipped table (docs/evaluation.md)."""


@ladder.command("show")
@click.option("--scale-table", "--table", "table", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A table of azhpc ladder fit [default: the shipped one] (--table: its earlier name).")
def ladder_show(table: Path | None) -> None:
    """Print the scale: every rung, its rating and 95% interval, and what it rests on."""
    from ..evaluate.scale import render_table

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
    from ..evaluate.scale import RUNGS, CalibrationSpec, calibrate, fit_scale, render_table, submit_calibration, write_fit

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
    from ..evaluate.scale import fit_scale, freeze as freeze_table, render_table, write_fit

    table = fit_scale(out_dir)
    where = write_fit(out_dir, table)
    click.echo(render_table(where))
    if freeze:
        click.echo(f"frozen into {freeze_table(table)}")


