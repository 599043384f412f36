"""The recipe's headline figures in the docs are the ones docs/calibration's scripts compute from the shipped table,
and the games those scripts carry are the games in the kept ledgers: a re-frozen table, a network rated again or an
edit to one side alone fails here instead of leaving the README quoting a figure nothing computes."""
from __future__ import annotations

import json
import re

import pytest

from alphazero_hpc.evaluate.elo import MatchScore
from alphazero_hpc.evaluate.scale import load_scale, scale_fit

from .conftest import ROOT, folded, ledger_games, load_script

CALIBRATION = ROOT / "docs" / "calibration"


def load(name: str):
    return load_script(CALIBRATION / f"{name}.py")


@pytest.fixture(scope="module")
def recompute():
    return load("recompute_runs")


def test_the_headline_line_is_the_runs_at_1600_on_the_shipped_table(recompute):
    """docs/evaluation.md's one line for the best arm, the README's bold mean and learn.yaml's header: the mean of
    RUNS_1600 refitted on the shipped table and its interval with the rungs' calibration, as ``azhpc seeds`` gives."""
    _, s = recompute.table(load_scale(), list(recompute.RUNS_1600.items()))
    low, high = s.mean_interval_calibrated
    mean, interval = f"{s.mean:.0f}", f"[{low:.0f}, {high:.0f}]"
    evaluation = (ROOT / "docs" / "evaluation.md").read_text()
    assert f"**{mean} on the Stockfish 15.1 UCI_Elo scale {interval} after 2.0" in evaluation
    readme = folded("README.md")
    assert f"average **{mean}**" in readme and f"**{interval} with the rungs' calibration**" in readme
    assert f"mean {mean} ([{s.mean_low:.0f}, {s.mean_high:.0f}] from the spread, {interval} with the calibration)" in \
        (ROOT / "configs" / "learn.yaml").read_text()
    assert len(s.runs) == len(recompute.RUNS_1600)


@pytest.mark.parametrize(("seed", "simulations"), [(13, 800), (15, 800), (16, 800), (13, 1600), (15, 1600), (16, 1600),
                                                  (17, 1600), (18, 1600), (22, 1600), (13, 3200), (15, 3200), (16, 3200), (17, 3200), (22, 3200)])
def test_the_transcribed_games_of_a_kept_network_are_its_ledgers(recompute, seed, simulations):
    """Every network kept in docs/networks: the rung games recompute_runs.py fits (its RUNS, RUNS_1600, RUNS_3200) are the
    games in the network's own ledger at that setting, game for game."""
    runs = {800: recompute.RUNS, 1600: recompute.RUNS_1600, 3200: recompute.RUNS_3200}[simulations]
    written = {rung: score for _, rung, score in recompute.games(runs[seed][1])}
    assert written == ledger_games(f"learn-seed{seed}", simulations)


def test_the_supervised_network_s_transcribed_games_are_its_ledger(recompute):
    """The supervised track's network kept in docs/networks/supervised-d6-12k: the games recompute_runs.py fits at
    PUCT 1600 (its SUPERVISED_1600, the figure docs/evaluation.md quotes) are those of its ledger."""
    games = recompute.games(recompute.SUPERVISED_1600[1])
    assert {rung: score for _, rung, score in games} == ledger_games("supervised-d6-12k", 1600)
    r = scale_fit(games, load_scale())["net"]
    figure = f"{r.elo:.0f} [{r.low:.0f}, {r.high:.0f}]"
    assert recompute.SUPERVISED_1600[0] == figure
    assert f"**{r.elo:.0f} on the Stockfish 15.1 UCI_Elo scale [{r.low:.0f}, {r.high:.0f}] after 1.15 CPU-hours**" in \
        (ROOT / "docs" / "evaluation.md").read_text()
    assert f"**{figure}" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("network", ["arm-8x64-seed19", "arm-g32m8-seed20", "arm-qi-seed21", "swa4-seed22",
                                     "arm-cs01-seed23", "arm-qi-seed24", "learn-seed25",
                                     "arm-int8-seed26"])
def test_an_arm_s_quoted_figure_is_its_kept_ledger(network):
    """The arms run again at the full budget and kept in docs/networks (8x64-rr2, 6x64-g32m8, 6x64-qi on a Zen 5; seed
    22's last four networks averaged, 6x64-cs01 and 6x64-qi again, on a Zen 4; the recipe in float32 and in int8 on a Zen 3): the figure README and
    docs/evaluation.md set against the recipe's is the fit of its kept games at PUCT 1600 on the shipped table, from
    as many games as its row of docs/networks/README.md says, each rung's score the one that row gives."""
    row = re.search(rf"^\| `{network}` .*?\((\d+) games(.*)$", (ROOT / "docs" / "networks" / "README.md").read_text(), re.M)
    assert row, network
    games = [("net", rung, score) for rung, score in ledger_games(network, 1600).items()]
    assert sum(score.games for _, _, score in games) == int(row[1])
    for _, rung, s in games:  # and each rung's score as the row gives it: greedy 10-0-0, -2 1-1-8, Stockfish skill 0 ...
        skill = re.fullmatch(r"fairy-stockfish:skill=(-\d+),depth=1", rung)  # a rung with no label here: KeyError
        label = skill[1] if skill else {"greedy": "greedy", "stockfish:skill=0,depth=1": "Stockfish skill 0 at depth 1"}[rung]
        assert re.search(rf"(?<![\w-]){re.escape(label)} {s.wins}-{s.draws}-{s.losses}\b", row[2]), (network, rung, s)
    r = scale_fit(games, load_scale())["net"]
    figure = f"{r.elo:.0f} [{r.low:.0f}, {r.high:.0f}]"
    for doc in (("README.md",), ("docs", "evaluation.md"), ("docs", "networks", "README.md")):
        assert figure in folded(*doc), doc


def test_games_reads_every_rung_once_with_its_score(recompute):
    assert recompute.games("greedy 10-0-0, -2 23-1-6, sf 1-0-9") == [
        ("net", "greedy", MatchScore(10, 0, 0)), ("net", "fairy-stockfish:skill=-2,depth=1", MatchScore(23, 1, 6)),
        ("net", "stockfish:skill=0,depth=1", MatchScore(1, 0, 9))]
    with pytest.raises(KeyError):
        recompute.games("-5 1-0-0")


def test_openings_check_counts_the_anchor_from_either_side():
    check = load("openings_check")
    rung, other = "stockfish:skill=0,depth=1", "fairy-stockfish:skill=-1,depth=1"
    matches = [(check.ANCHOR, rung, MatchScore(3, 1, 2)), (rung, check.ANCHOR, MatchScore(4, 0, 6)),
               (check.ANCHOR, other, MatchScore(9, 9, 9)), (rung, other, MatchScore(9, 9, 9))]
    assert check.against(matches, rung) == MatchScore(9, 1, 6)
    assert check.against(matches, "greedy") == MatchScore(0, 0, 0)


def test_the_kept_openings_games_are_the_documented_score(tmp_path, capsys):
    """docs/calibration/openings-check-2026-12-04.jsonl summarised as its docstring says: the 24-1-15 quoted in
    docs/evaluation-log.md ("The openings tested")."""
    check = load("openings_check")
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "ledger.jsonl").write_bytes((CALIBRATION / "openings-check-2026-12-04.jsonl").read_bytes())
    check.summary(tmp_path, "stockfish:skill=0,depth=1", "random:6")
    line = next(x for x in capsys.readouterr().out.splitlines() if "this ledger" in x)
    wdl = re.search(r"\+(\d+) =(\d+) -(\d+)", line)
    assert wdl is not None
    w, d, l = wdl.groups()
    assert f"{w}-{d}-{l}" in (ROOT / "docs" / "evaluation-log.md").read_text()
    assert int(w) + int(d) + int(l) == 40


def test_the_shipped_table_is_the_fit_of_the_kept_calibration_ledger(tmp_path):
    """docs/calibration/README.md: ``azhpc ladder fit`` on docs/calibration/ledger.jsonl gives the shipped table back
    (every rung's rating and interval, the blocks it leaves out), so the ledger kept is the one the table came from."""
    from alphazero_hpc.evaluate.scale import fit_scale, read_table

    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "ledger.jsonl").write_bytes((CALIBRATION / "ledger.jsonl").read_bytes())
    fitted, shipped = fit_scale(tmp_path), read_table()
    assert [(r["name"], r["elo"], r["low"], r["high"], r["games"]) for r in fitted["rungs"]] == \
        [(r["name"], r["elo"], r["low"], r["high"], r["games"]) for r in shipped["rungs"]]
    assert fitted["pairs"] == shipped["pairs"]
    for key in ("blocks", "games", "shared_engine_blocks_left_out"):
        assert fitted["provenance"].get(key) == shipped["provenance"].get(key), key


def test_the_kept_depth1_games_are_the_documented_scores(tmp_path, capsys):
    """docs/calibration/depth1-check-2026-12-04-*.jsonl summarised by depth1_check.py: the scores and the difference
    docs/evaluation-log.md quotes ("Depth-1 rungs sharing a process"), and evaluation.md's summary of them."""
    check = load("depth1_check")
    for arm in check.ARMS:
        (tmp_path / arm / "eval").mkdir(parents=True)
        (tmp_path / arm / "eval" / "ledger.jsonl").write_bytes(
            (CALIBRATION / f"depth1-check-2026-12-04-{arm}.jsonl").read_bytes())
    check.summary(tmp_path, "stockfish:skill=0,depth=1", "fairy-stockfish:skill=-1,depth=1")
    out = capsys.readouterr().out
    evaluation, summary = folded("docs", "evaluation-log.md"), folded("docs", "evaluation.md")
    for arm in check.ARMS:
        line = next(x for x in out.splitlines() if x.strip().startswith(f"{arm}:"))
        wdl = re.search(r"\+(\d+) =(\d+) -(\d+) in 1000", line)
        assert wdl is not None, line
        assert f"{arm} {wdl.group(1)}-{wdl.group(2)}-{wdl.group(3)}" in evaluation
    diff = re.search(r"per-game minus shared: ([+-]\d\.\d+) in score", out)
    assert diff is not None and f"{diff.group(1)} in score" in evaluation
    scores = {arm: (s.wins + s.draws / 2) / s.games for arm, s in
              ((arm, check.total(tmp_path, arm, "stockfish:skill=0,depth=1", "fairy-stockfish:skill=-1,depth=1"))
               for arm in check.ARMS)}
    assert f"scored {scores['per-game']:.3f} against {scores['shared']:.3f}, {diff.group(1)} +-" in summary


def test_the_kept_play_ab_matches_are_the_log_s_table():
    """docs/calibration/play-ab-2026-12-07/*.json summarised by play_ab.py: every row of the log's table "Search
    constants at play, head to head at T=3" (B's W/D/L, score and Elo with its interval), the pooled T=4 row too,
    and every match is 60 games from a kept network."""
    ab = load("play_ab")
    kept = sorted((CALIBRATION / "play-ab-2026-12-07").glob("*.json"))
    assert len(kept) >= 6
    log = folded("docs", "evaluation-log.md")
    section = log[log.index("### Search constants at play, head to head at T=3"):]
    section = section[:section.index("###", 3)]
    lines = [ab.summary_line(path) for path in kept] + ab.pooled_lines(kept)
    assert any(line.startswith("pooled, 3 networks") for line in lines)
    for line in lines:
        found = re.search(r"\+(\d+) =(\d+) -(\d+), score (\d\.\d+), Elo (\S+) \[(\S+), (\S+)\]", line)
        assert found is not None, line
        w, d, l, score, elo, low, high = found.groups()
        assert f"| +{w} ={d} -{l} | {score} | {elo} [{low}, {high}] |" in section, line
    for path in kept:
        match = json.loads(path.read_text())
        assert len(match["a_points"]) == 60 and (ROOT / match["run"] / "models").is_dir(), path


def test_play_ab_changes_only_numeric_search_constants():
    """play_ab.py's --a/--b: a numeric field of mcts is replaced (an int stays an int), anything else is refused
    in one line, before a game is played."""
    from alphazero_hpc.config import MCTSConfig

    ab = load("play_ab")
    changed = ab.overrides(MCTSConfig(), "c_init=1.8,fpu_reduction_root=0.25,gumbel_considered=8")
    assert (changed.c_init, changed.fpu_reduction_root, changed.gumbel_considered) == (1.8, 0.25, 8)
    assert isinstance(changed.gumbel_considered, int) and ab.overrides(MCTSConfig(), "") == MCTSConfig()
    for bad in ("algorithm=puct", "bogus=1", "tree_reuse=1"):
        with pytest.raises(SystemExit, match="not a numeric field of mcts"):
            ab.overrides(MCTSConfig(), bad)
    for bad, why in (("gumbel_considered=8.5", "expected int"), ("c_init=abc", "expected float"),
                     ("c_init=-1", "must be > 0")):  # read and checked as --set mcts.KEY=VALUE is
        with pytest.raises(SystemExit, match=why):
            ab.overrides(MCTSConfig(), bad)
