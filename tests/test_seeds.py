"""``azhpc seeds``: several runs of one recipe on the scale, their mean and its interval."""

import json
import math
import statistics

import numpy as np
import pytest

from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.evaluate.ladder import run_ladder
from alphazero_hpc.evaluate.ledger import append_entry
from alphazero_hpc.evaluate.seeds import rate_runs, student_t_quantile
from alphazero_hpc.store.paths import RunPaths

from .conftest import run_cli
from .test_scale import small_table

RUNGS = ["random", "fairy-stockfish:skill=-12,depth=1", "greedy"]  # the small table's, at 0, 400 and 800
PUCT = {"search": "puct", "simulations": 800, "policy_temperature": 3.0, "tree_reuse": True}


@pytest.mark.parametrize("df,table", [(1, 12.706), (2, 4.303), (4, 2.776), (7, 2.365), (30, 2.042), (1000, 1.962)])
def test_t_quantiles_match_the_printed_table(df, table):
    assert student_t_quantile(0.975, df) == pytest.approx(table, abs=1e-3)


def test_t_quantile_refuses_what_it_cannot_give():
    with pytest.raises(ValueError):
        student_t_quantile(0.4, 3)
    with pytest.raises(ValueError):
        student_t_quantile(0.975, 0)


def a_run(root, name, scores, setup=PUCT, generation=9):
    """A run whose network ``gen:G`` played each rung with ``setup``: ``scores`` W-D-L per rung, weakest first."""
    paths = RunPaths(root / name)
    for rung, (w, d, l) in zip(RUNGS, scores):
        append_entry(paths, {"key": f"gen:{generation}|{rung}|{sorted(setup.items())}", "player": f"gen:{generation}",
                             "opponent": rung, "wins": w, "draws": d, "losses": l, **setup})
    return paths.root


def test_seeds_takes_each_runs_last_network_at_the_setting_and_sums_them_up(tmp_path):
    table = small_table(tmp_path)
    runs = [a_run(tmp_path, "s1", [(20, 0, 0), (15, 2, 3), (6, 2, 12)]),
            a_run(tmp_path, "s2", [(20, 0, 0), (18, 1, 1), (10, 2, 8)]),
            a_run(tmp_path, "s3", [(19, 1, 0), (12, 3, 5), (3, 2, 15)])]
    # what must not be taken: an older network at the setting, the last one at the run's own search
    a_run(tmp_path, "s1", [(20, 0, 0), (20, 0, 0), (20, 0, 0)], generation=4)
    a_run(tmp_path, "s2", [(0, 0, 20), (0, 0, 20), (0, 0, 20)], setup={}, generation=12)

    s = rate_runs(runs, "puct800,T=3,reuse", table=table)
    assert [r.player for r in s.runs] == ["gen:9@puct800,T=3,reuse"] * 3
    for run, r in zip(runs, s.runs):  # each run's rating as azhpc elo --scale fits it
        fitted = {x.name: x for x in run_ladder(run, scale=True, table=table, write=False)[0]}[r.player]
        assert (r.elo, r.low, r.high, r.games) == (fitted.elo, fitted.low, fitted.high, fitted.games)
    elos = [r.elo for r in s.runs]
    assert len(set(elos)) == 3 and s.runs[1].elo > s.runs[0].elo > s.runs[2].elo  # the scores' order
    assert s.mean == pytest.approx(statistics.mean(elos)) and s.sd == pytest.approx(statistics.stdev(elos))
    assert s.mean_high - s.mean == pytest.approx(4.303 * s.sd / math.sqrt(3), rel=1e-3)
    assert s.next_high - s.mean == pytest.approx(4.303 * s.sd * math.sqrt(1 + 1 / 3), rel=1e-3)

    # the games' own error: the same fit on a copy of the table whose rungs are exact
    exact_table = tmp_path / "exact.json"
    data = json.loads(table.read_text())
    data["rungs"] = [{**r, "low": r["elo"], "high": r["elo"]} for r in data["rungs"]]
    exact_table.write_text(json.dumps(data))
    games_var = []
    for run, r in zip(runs, s.runs):
        fitted = {x.name: x for x in run_ladder(run, scale=True, table=exact_table, write=False)[0]}[r.player]
        assert fitted.low is not None and fitted.high is not None
        assert r.games_half == pytest.approx((fitted.high - fitted.low) / 2) and r.games_half < (r.high - r.low) / 2
        games_var.append((r.games_half / 1.959964) ** 2)
    assert s.between_sd == pytest.approx(math.sqrt(max(s.sd ** 2 - float(np.mean(games_var)), 0)), rel=1e-3)
    calibration_var = [((r.high - r.low) / (2 * 1.959964)) ** 2 - v for r, v in zip(s.runs, games_var)]
    assert s.calibration_half == pytest.approx(1.959964 * math.sqrt(float(np.mean(calibration_var))), rel=1e-3)
    assert 10 < s.calibration_half < 80  # the rungs' +-78 (sd 40) at 95%, shared out over the games
    low, high = s.mean_interval_calibrated
    assert low < s.mean_low and high > s.mean_high
    assert high - s.mean == pytest.approx(math.hypot(s.mean_high - s.mean, s.calibration_half))



def test_seeds_picks_a_generation_and_says_which_run_lacks_it(tmp_path):
    table = small_table(tmp_path)
    runs = [a_run(tmp_path, "s1", [(20, 0, 0), (15, 2, 3), (6, 2, 12)]),
            a_run(tmp_path, "s2", [(20, 0, 0), (18, 1, 1), (10, 2, 8)])]
    a_run(tmp_path, "s1", [(20, 0, 0), (20, 0, 0), (19, 0, 1)], generation=4)
    with pytest.raises(AzhpcError, match=r"s2: generation 4 rated at puct800,T=3,reuse is not in its ledger "
                                         r".*azhpc evaluate \S+s2 --generation 4 --scale"):
        rate_runs(runs, "puct800,T=3,reuse", generation=4, table=table)
    a_run(tmp_path, "s2", [(20, 0, 0), (20, 0, 0), (18, 0, 2)], generation=4)
    at4 = rate_runs(runs, "puct800,T=3,reuse", generation=4, table=table)
    assert [r.player for r in at4.runs] == ["gen:4@puct800,T=3,reuse"] * 2
    assert at4.mean > rate_runs(runs, "puct800,T=3,reuse", table=table).mean  # the stronger scores
    with pytest.raises(AzhpcError, match=r"s1: a network rated at its own search is not in its ledger \(it rates "
                                         r"networks at: puct800,T=3,reuse\): pick one with --tag"):
        rate_runs(runs, "", table=table)
    with pytest.raises(AzhpcError, match="at least two runs"):
        rate_runs(runs[:1], "puct800,T=3,reuse", table=table)
    with pytest.raises(AzhpcError, match="named twice"):
        rate_runs([runs[0], runs[0] / ".." / "s1"], "puct800,T=3,reuse", table=table)
    with pytest.raises(AzhpcError, match=r"empty: no evaluation ledger .*azhpc evaluate \S+empty --generation G --scale"):
        rate_runs([runs[0], tmp_path / "empty"], "puct800,T=3,reuse", table=table)
    unrated = RunPaths(tmp_path / "unrated")  # a ledger with no match against a rung of the scale
    append_entry(unrated, {"key": "k", "player": "gen:3", "opponent": "gen:1", "wins": 5, "draws": 0, "losses": 5})
    with pytest.raises(AzhpcError, match=r"no match .* against a rung .*--scale first"):
        rate_runs([runs[0], unrated.root], "puct800,T=3,reuse", table=table)


def test_seeds_takes_generation_zero_and_a_tag_written_with_its_at(tmp_path):
    table = small_table(tmp_path)
    runs = [a_run(tmp_path, "s1", [(20, 0, 0), (15, 2, 3), (6, 2, 12)], generation=0),
            a_run(tmp_path, "s2", [(20, 0, 0), (18, 1, 1), (10, 2, 8)], generation=0)]
    a_run(tmp_path, "s1", [(20, 0, 0), (20, 0, 0), (20, 0, 0)], generation=2)
    a_run(tmp_path, "s2", [(20, 0, 0), (20, 0, 0), (20, 0, 0)], generation=2)
    s = rate_runs(runs, "@puct800,T=3,reuse", generation=0, table=table)
    assert [r.player for r in s.runs] == ["gen:0@puct800,T=3,reuse"] * 2
    assert s.mean < rate_runs(runs, "puct800,T=3,reuse", table=table).mean  # not generation 2


def test_seeds_command_prints_each_run_and_the_mean_or_one_json_object(tmp_path):
    table = small_table(tmp_path)
    runs = [a_run(tmp_path, "s1", [(20, 0, 0), (15, 2, 3), (6, 2, 12)]),
            a_run(tmp_path, "s2", [(20, 0, 0), (18, 1, 1), (10, 2, 8)])]
    args = ["seeds", *map(str, runs), "--tag", "puct800,T=3,reuse", "--scale-table", str(table)]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    s = rate_runs(runs, "puct800,T=3,reuse", table=table)
    for r in s.runs:
        assert f"{r.player}" in out and f"{r.elo:.0f}" in out
    low, high = s.mean_interval_calibrated
    assert f"2 runs: mean {s.mean:.0f}" in out and f"[{s.mean_low:.0f}, {s.mean_high:.0f}]" in out
    assert f"[{low:.0f}, {high:.0f}] with the rungs' calibration" in out
    data = json.loads(run_cli(*args, "--json").stdout)
    assert data["mean"] == pytest.approx(s.mean) and [r["player"] for r in data["runs"]] == [r.player for r in s.runs]
    assert data["df"] == 1 and data["mean_high_calibrated"] == pytest.approx(high)
    bad = run_cli("seeds", str(runs[0]), "--scale-table", str(table))
    assert bad.returncode == 1 and "at least two runs" in bad.stderr and "Traceback" not in bad.stderr
