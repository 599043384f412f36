"""The fifteen 2-CPU-hour runs' ratings at PUCT 800, T=3, tree reuse (docs/evaluation.md's table), fitted again from
each network's games against the rungs, as written in docs/evaluation-log.md: with the rungs' calibration carried whole
(their covariances, as the package now does) and on the diagonal alone (as it did before 2026-12-02), and the part
that the games alone make. Then the supervised track's network (run "sup"), and the mean over the fifteen runs and its interval as ``azhpc
seeds`` computes it; then the same for the twelve networks rated at PUCT 1600, T=3, tree reuse, with the supervised
track's network of the fifty-sixth session rated there (run "sup", not in the mean); then the doublings
from 800 to 1600 and the estimate of every run's mean at 1600 that they give; then the networks rated at PUCT 3200 and the
estimate of the twelve's mean there that their gains over 1600 give.

    python docs/calibration/recompute_runs.py [TABLE]

TABLE: a scale table (default: the shipped one). The "documented" column is each rating as first printed: seeds 1-13
at PUCT 800 and seeds 5-10 at 1600 on the table of 2026-11-24, before the re-freeze with the top link's replay; seed
13 at 1600 and seeds 15 and 16 on that of 2026-12-02 (with covariances), seed 16 at 1600 on that of b52dcf8
(2026-12-04, the anchor tied directly to the rungs below it). The shipped table is the one re-frozen after it on
2026-12-04 with the anchor's 150 games played one engine process per game (docs/evaluation-log.md, "The runner: one
engine process per game" and "The anchor's link completed"; its first 80 games alone: `git show
60ad63e:alphazero_hpc/evaluate/scale.json`). To check the transcription against the printed figures (all but seed 7 at 1600 and the
supervised network, whose games against the anchor are left out, below):

    git show c5673a2:alphazero_hpc/evaluate/scale.json > /tmp/scale-2026-11-24.json
    python docs/calibration/recompute_runs.py /tmp/scale-2026-11-24.json
    git show 6aa9353:alphazero_hpc/evaluate/scale.json > /tmp/scale-2026-12-02.json
    python docs/calibration/recompute_runs.py /tmp/scale-2026-12-02.json
    git show b52dcf8:alphazero_hpc/evaluate/scale.json > /tmp/scale-2026-12-04.json
    python docs/calibration/recompute_runs.py /tmp/scale-2026-12-04.json
"""

import math
import statistics
import sys
from pathlib import Path
from typing import Sequence

from alphazero_hpc.evaluate.elo import Z95, MatchScore
from alphazero_hpc.evaluate.scale import ScaleRung, exact, load_scale, scale_fit
from alphazero_hpc.evaluate.seeds import RunRating, SeedSummary, student_t_quantile, summarise

R = {"-1": "fairy-stockfish:skill=-1,depth=1", "-2": "fairy-stockfish:skill=-2,depth=1",
     "-3": "fairy-stockfish:skill=-3,depth=1", "-4": "fairy-stockfish:skill=-4,depth=1",
     "-8": "fairy-stockfish:skill=-8,depth=1", "-12": "fairy-stockfish:skill=-12,depth=1", "sf": "stockfish:skill=0,depth=1", "greedy": "greedy",
     "anchor": "stockfish:elo=1350,tc=60+0.6"}
RUNS = {  # seed: the documented rating, then its games, rung W-D-L
    1: ("1062 [984, 1139]", "-1 7-4-9, -2 16-2-12, -3 18-2-10, -4 26-0-4, greedy 10-0-0"),
    2: ("1163 [1081, 1245]", "sf 11-5-14, -1 21-3-26, -2 6-0-4, greedy 10-0-0"),
    3: ("1017 [937, 1096]", "-1 6-2-12, -2 12-0-18, -3 17-2-11, -4 10-0-0, greedy 10-0-0"),
    4: ("899 [815, 982]", "-2 8-1-21, -3 9-0-21, -4 27-1-2, greedy 10-0-0"),
    5: ("997 [910, 1084]", "-2 14-1-15, -3 29-4-17, -4 7-0-3, greedy 10-0-0"),
    6: ("966 [879, 1052]", "-2 9-1-20, -3 30-0-20, -4 9-0-1, greedy 10-0-0"),
    7: ("1095 [1016, 1175]", "-1 9-5-16, -2 19-1-10, -3 14-0-6, sf 2-0-8, greedy 10-0-0"),
    8: ("982 [896, 1068]", "-2 21-1-28, -3 17-0-13, -4 9-0-1, -12 10-0-0, greedy 10-0-0"),
    9: ("1101 [1017, 1186]", "-1 19-0-31, -2 20-0-10, sf 2-0-8, greedy 10-0-0"),
    10: ("975 [888, 1062]", "-2 12-1-17, -3 28-0-22, -4 9-0-1, greedy 10-0-0"),
    11: ("1172 [1088, 1256]", "greedy 10-0-0, -2 9-1-0, -1 15-1-14, sf 5-1-24"),
    12: ("979 [894, 1063]", "greedy 10-0-0, -4 10-0-0, -3 24-2-24, -2 14-0-16"),
    13: ("991 [903, 1078]", "greedy 10-0-0, -4 25-0-5, -3 18-0-12, -2 13-1-16"),
    15: ("1012 [918, 1106]", "greedy 10-0-0, -4 10-0-0, -3 20-0-10, -2 18-3-29"),
    16: ("992 [896, 1088]", "greedy 10-0-0, -2 11-4-15, -1 3-1-6, sf 0-1-9, -3 12-0-8"),
}
# the same recipe's networks at PUCT 1600, T=3, tree reuse (docs/evaluation-log.md, the table after the float32 run): seeds
# 5-10 as printed then (the rungs taken as independent, on the table of 2026-11-24), seeds 13 and 15 as printed (covariances), seeds 16-18 and 22 as printed on the table of 2026-12-04 (docs/evaluation-log.md,
# "Seed 17 at PUCT 1600", "Seed 18 at PUCT 1600", "Seed 22 at PUCT 1600"; seeds 17 and 18 on a Zen 5, 22 on a Zen 4)
RUNS_1600 = {
    5: ("1103 [1020, 1187]", "sf 3-1-6, -1 17-2-31, -2 19-1-10, greedy 10-0-0"),
    6: ("1017 [929, 1104]", "-2 15-1-24, -3 21-0-9, -4 10-0-0, -8 10-0-0, greedy 10-0-0"),
    7: ("1189 [1107, 1271]", "sf 10-3-17, -1 15-2-13, -2 6-0-4, greedy 10-0-0"),  # and anchor 4-0-6, see below
    8: ("1009 [932, 1087]", "-1 1-2-17, -2 18-2-10, -3 16-1-13, -4 10-0-0, greedy 10-0-0"),
    9: ("1208 [1127, 1289]", "sf 12-2-16, -1 17-2-11, -2 19-2-9, greedy 10-0-0"),
    10: ("1063 [979, 1148]", "sf 1-0-9, -1 11-3-16, -2 25-1-24, greedy 10-0-0"),
    13: ("1078 [986, 1169]", "greedy 10-0-0, -2 27-1-22, -1 8-1-21, sf 4-1-5"),
    15: ("1176 [1087, 1265]", "greedy 10-0-0, -2 7-0-3, -1 21-1-28, sf 13-4-13"),
    16: ("1066 [979, 1152]", "greedy 10-0-0, -2 23-1-6, -1 16-1-33, sf 1-0-9"),
    17: ("1075 [980, 1170]", "greedy 10-0-0, -2 8-1-1, -1 27-3-20, sf 9-2-19"),  # on a Zen 5, 159 generations
    18: ("981 [883, 1079]", "greedy 10-0-0, -2 27-1-22, -1 14-0-16, sf 3-0-7"),  # on a Zen 5, 157 generations
    22: ("964 [866, 1061]", "greedy 10-0-0, -2 27-3-20, -1 10-0-20, sf 3-1-6"),  # on a Zen 4, 69 generations
}
# twice the search again, PUCT 3200, T=3, tree reuse (docs/evaluation-log.md, "Seed 16 at PUCT 3200", "Seed 13 at
# PUCT 3200", "Seed 15 at PUCT 3200", "Seed 17 at PUCT 3200"): four of the six kept networks, as printed
RUNS_3200 = {
    16: ("1071 [976, 1166]", "greedy 10-0-0, -2 7-0-3, -1 26-1-23, sf 10-6-14"),
    13: ("1054 [954, 1154]", "greedy 10-0-0, -2 17-0-13, -4 10-0-0, -3 10-0-0, -1 22-0-18"),
    15: ("1042 [946, 1138]", "greedy 10-0-0, -2 20-1-9, -1 25-2-23, sf 2-2-6"),
    17: ("1001 [904, 1097]", "greedy 10-0-0, -2 19-1-10, -1 23-1-26, sf 1-1-8"),  # on a Zen 5, 2026-12-06
    22: ("873 [775, 972]", "greedy 10-0-0, -2 9-3-18, -1 6-3-21, sf 2-1-7, -3 8-0-2, -4 9-0-1"),  # on a Zen 4, 2026-12-07
}
# the two doublings measured at T=1 without tree reuse (docs/evaluation.md's table: PUCT 800 -> PUCT 1600), as printed
DOUBLINGS_T1 = {1: (915, 950), 2: (970, 1032)}
# the supervised track (docs/evaluation.md, "The supervised track"): 70 of its 94 games listed (its 4 check games not, and its 20 against the anchor left out, below)
SUPERVISED = ("1250 [1175, 1325]", "-3 9-0-1, -2 10-0-0, -1 17-2-11, sf 9-2-9")  # and anchor 5-0-15, see below
# the same supervised command run again on 2026-12-05 (fifty-sixth session, the same 12,000 games, 1.15 CPU-hours on a
# Zen 5) and its network rated at the recipe's play setting, PUCT 1600, T=3, tree reuse (docs/evaluation-log.md, "The
# supervised network at PUCT 1600" and "The supervised network's rating completed": 120 games in the fifty-sixth
# session, the rest to the 200-game cap in the fifty-seventh), as printed; kept in docs/networks/supervised-d6-12k
SUPERVISED_1600 = ("1605 [1526, 1684]", "greedy 10-0-0, -2 10-0-0, -1 10-0-0, sf 86-1-3, anchor 64-1-15")
# Seed 7's 4-0-6 and the supervised network's 5-0-15 against the anchor were played before 2026-12-04, when one
# Stockfish process answered every game of a block in turn, which weakened the anchor (docs/evaluation-log.md, "The
# runner: one engine process per game"): like every fit of the package, these leave them out.


def games(text: str) -> list[tuple[str, str, MatchScore]]:
    out = []
    for part in text.split(", "):
        rung, wdl = part.split()
        out.append(("net", R[rung], MatchScore(*(int(x) for x in wdl.split("-")))))
    return out


def main() -> None:
    rungs = load_scale(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    print("PUCT 800, T=3, tree reuse (every run; the documented setting until 2026-12-04)")
    at800, summary800 = table(rungs, [*RUNS.items(), ("sup", SUPERVISED)])
    print("\nPUCT 1600, T=3, tree reuse (the documented setting since 2026-12-04)")
    at1600, summary1600 = table(rungs, [*RUNS_1600.items(), ("sup", SUPERVISED_1600)])
    doublings(at800, at1600, summary800.calibration_half)
    print("\nPUCT 3200, T=3, tree reuse (not the documented setting: only the kept networks can be rated there)")
    gains = []
    for seed, (documented, text) in RUNS_3200.items():
        r = scale_fit(games(text), rungs)["net"]
        gains.append(round(r.elo - at1600[seed]))
        print(f"seed {seed}: documented {documented}, refitted {r.elo:.0f} [{r.low:.0f}, {r.high:.0f}], "
              f"{gains[-1]:+d} over its PUCT 1600 ({at1600[seed]:.0f})")
    print(f"1600 -> 3200 on {len(gains)} networks: {min(gains):+d} to {max(gains):+d}, mean {statistics.mean(gains):+.0f}")
    estimate(f"the {len(at1600)} runs' mean at 3200", "1600", list(at1600.values()), gains,
             summary1600.calibration_half)


def doublings(at800: dict[int | str, float], at1600: dict[int | str, float], cal800: float) -> None:
    """800 -> 1600 on the networks rated at both, each side refitted on the same table (the documented points can
    come from different tables: seed 16's 800 was printed on that of 2026-12-02, its 1600 on that of 2026-12-04),
    with the two at T=1 without reuse (as printed, both on one table); then the mean of every run at 1600 as an
    estimate (``estimate``)."""
    t3 = {seed: round(at1600[seed] - at800[seed]) for seed in at1600 if seed in at800}
    print("doublings at T=3 with reuse, refitted: " + ", ".join(f"seed {k} {v:+d}" for k, v in t3.items()))
    every = [b - a for a, b in DOUBLINGS_T1.values()] + list(t3.values())
    for label, gains in ((f"{len(every)} doublings (the {len(DOUBLINGS_T1)} at T=1 without reuse included)", every),
                         (f"the {len(t3)} at T=3 with reuse", list(t3.values()))):
        n, mean, sd = len(gains), statistics.mean(gains), statistics.stdev(gains)
        half = student_t_quantile(0.975, n - 1) * sd / math.sqrt(n)
        print(f"{label}: {min(gains):+d} to {max(gains):+d}, mean {mean:+.0f} [{mean - half:+.0f}, {mean + half:+.0f}]")
    estimate(f"the {len(at800)} runs' mean at 1600", "800", list(at800.values()), every, cal800)


def estimate(label: str, base: str, runs: Sequence[float], gains: Sequence[float], cal: float) -> None:
    """A mean at twice the search, estimated: the runs' mean at ``base`` plus the mean gain of the networks rated at
    both, their standard errors taken as independent (Student's t at the runs' degrees of freedom), the rungs'
    calibration at ``base`` added in quadrature."""
    n, mean, gain = len(runs), statistics.mean(runs), statistics.mean(gains)
    se = math.hypot(statistics.stdev(runs) / math.sqrt(n), statistics.stdev(gains) / math.sqrt(len(gains)))
    half = student_t_quantile(0.975, n - 1) * se
    both = math.hypot(half, cal)
    point = mean + gain
    print(f"{label}, estimated ({mean:.0f} at {base} {gain:+.0f}): ~{point:.0f}, roughly [{point - half:.0f}, "
          f"{point + half:.0f}], [{point - both:.0f}, {point + both:.0f}] with the rungs' calibration (+-{cal:.0f})")


def table(rungs: list[ScaleRung], runs: list[tuple[int | str, tuple[str, str]]]) -> tuple[dict[int | str, float], SeedSummary]:
    """Each run fitted three ways, then the self-play runs' mean, its intervals and a 95% prediction for one more run
    (mean +- t sd sqrt(1 + 1/n)), as ``azhpc seeds`` computes them (``summarise``); returns the self-play runs' refitted ratings by seed and their summary."""
    diagonal = [ScaleRung(r.name, r.elo, r.sd, r.timed) for r in rungs]
    print(f"{'run':>4}  {'documented':>18}  {'covariances':>18}  {'diagonal':>18}  games only  calibration (cov / diag)")
    rated, by_seed = [], {}
    for seed, (documented, text) in runs:
        m = games(text)
        full, diag, alone = (scale_fit(m, x)["net"] for x in (rungs, diagonal, exact(rungs)))
        sd = {k: (r.high - r.low) / (2 * Z95) for k, r in (("full", full), ("diag", diag), ("alone", alone))}
        cal = math.sqrt(max(sd["full"] ** 2 - sd["alone"] ** 2, 0.0))
        cal_diag = math.sqrt(max(sd["diag"] ** 2 - sd["alone"] ** 2, 0.0))
        if seed != "sup":  # the mean is the self-play recipe's
            rated.append(RunRating(Path(f"seed-{seed}"), "net", full.elo, full.low, full.high, Z95 * sd["alone"],
                                   sum(score.games for _, _, score in m)))
            by_seed[seed] = full.elo
        print(f"{seed:>4}  {documented:>18}  {full.elo:>5.0f} [{full.low:.0f}, {full.high:.0f}]  "
              f"{diag.elo:>5.0f} [{diag.low:.0f}, {diag.high:.0f}]  +-{Z95 * sd['alone']:>4.0f}      "
              f"+-{Z95 * cal:.0f} / +-{Z95 * cal_diag:.0f}")
    r = summarise(rated)
    low, high = r.mean_interval_calibrated
    print(f"{len(rated)} runs: mean {r.mean:.0f}, sd {r.sd:.0f}; the mean's 95% interval [{r.mean_low:.0f}, "
          f"{r.mean_high:.0f}] from the spread, [{low:.0f}, {high:.0f}] with the rungs' calibration "
          f"(+-{r.calibration_half:.0f}); one more run predicted in [{r.next_low:.0f}, {r.next_high:.0f}]")
    return by_seed, r


if __name__ == "__main__":
    main()
