#!/usr/bin/env python3
"""One rating from matches against several opponents of known rating: the standard library only.

Each argument is a summary that outside_match.py wrote (``--json``; it carries ``opponent_rating``) or a result
typed as ``W-D-L@RATING`` (a match whose JSON was not kept). The rating is the maximum-likelihood one under the
logistic Elo model, draws as half a point (the score of every game against an opponent rated R has mean
1 / (1 + 10^((R - r) / 400))); its 95% interval is the delta method's (a sandwich): the games' observed spread
about the fitted expected scores, so draws narrow it as in outside_match.py's trinomial interval, and matches that
disagree with one rating widen it. It is symmetric in Elo, unlike outside_match.py's one-match interval. The
opponents' own uncertainty (their calibration) is not added.

    python docs/outside/pool.py scratch/outside-2.json scratch/outside-3.json 5-0-16@1054
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

SLOPE = math.log(10) / 400  # d expected-score / d rating = SLOPE * E * (1 - E)


def expected(rating: float, opponent: float) -> float:
    return 1 / (1 + 10 ** ((opponent - rating) / 400))


def parse(item: str) -> tuple[int, int, int, float]:
    """(wins, draws, losses, opponent rating) from a JSON summary's path or ``W-D-L@RATING``."""
    if os.path.exists(item):
        with open(item) as f:
            s = json.load(f)
        if s.get("opponent_rating") is None:
            raise SystemExit(f"{item}: no opponent_rating (rerun outside_match.py with --opponent-rating, or type W-D-L@RATING)")
        if s.get("stopped") or s.get("failures"):
            print(f"{item}: a match that was stopped or had failures; its finished games count", file=sys.stderr)
        w, d, l, rating = int(s["wins"]), int(s["draws"]), int(s["losses"]), float(s["opponent_rating"])
    else:
        counts, _, text = item.partition("@")
        try:
            w, d, l = (int(x) for x in counts.split("-"))
            rating = float(text)  # "" (no @RATING) is a ValueError too
            if not math.isfinite(rating):
                raise ValueError(text)
        except ValueError:
            raise SystemExit(f"{item}: neither a file nor W-D-L@RATING (e.g. 5-0-16@1054)") from None
    if min(w, d, l) < 0 or w + d + l == 0:
        raise SystemExit(f"{item}: wins, draws and losses must be >= 0 and not all 0")
    return w, d, l, rating


def pool(matches: list[tuple[int, int, int, float]]) -> dict[str, float]:
    games = sum(w + d + l for w, d, l, _ in matches)
    points = sum(w + d / 2 for w, d, _, _ in matches)
    if games == 0:
        raise SystemExit("no games")
    if points in (0, games):
        raise SystemExit("every game the same result: no finite rating (play a rung nearer the network)")

    def excess(r: float) -> float:  # observed minus expected points: decreasing in r, zero at the MLE
        return points - sum((w + d + l) * expected(r, opp) for w, d, l, opp in matches)

    low, high = min(opp for *_, opp in matches) - 4000.0, max(opp for *_, opp in matches) + 4000.0
    if not excess(low) > 0 > excess(high):  # 4000 Elo past every opponent: a score of 1e-10 or 1 - 1e-10
        raise SystemExit("no rating within 4000 Elo of the opponents fits these scores")
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if excess(mid) > 0 else (low, mid)
    r = (low + high) / 2
    variance = 0.0  # of the points' total: every game's squared residual about its expected score at r
    information = 0.0  # d expected points / d r
    for w, d, l, opp in matches:
        e = expected(r, opp)
        variance += w * (1 - e) ** 2 + d * (0.5 - e) ** 2 + l * e ** 2
        information += (w + d + l) * SLOPE * e * (1 - e)
    half = 1.96 * math.sqrt(variance) / information
    return {"games": games, "score": points / games, "rating": r, "rating_low": r - half, "rating_high": r + half}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("match", nargs="+", help="an outside_match.py --json file, or W-D-L@RATING")
    args = p.parse_args()
    matches = [parse(m) for m in args.match]
    for (w, d, l, opp), item in zip(matches, args.match):
        print(f"{item}: {w}-{d}-{l} against {opp:.0f}")
    s = pool(matches)
    print(f"pooled: {s['games']} games, score {s['score']:.3f}, rating {s['rating']:.0f} "
          f"[95% {s['rating_low']:.0f}, {s['rating_high']:.0f}] (the opponents' own uncertainty not added)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
