#!/usr/bin/env python3
"""The scale's untimed rungs played against each other outside the package, against the package's calibration: the
standard library only.

Each argument is a summary that outside_match.py wrote (``--json``) for two engine rungs at ``go depth 1`` (the first
engine with ``--engine-depth 1``), e.g. Stockfish at Skill Level 0 against Fairy-Stockfish at -1. For each pair it
prints the outside result and its Elo difference, the package's own calibration games of the same pair (the
``pairs`` of the shipped scale.json) and the difference of the two rungs' ratings in the table, with how many
standard errors the outside difference lies from each. Then every rung's rating from the outside games alone (the
maximum-likelihood chain, draws as half a point), the strongest rung played pinned at its rating in the table, against
the table's ratings (the outside ratings' 95% half-widths relative to the pinned rung). When the anchor was played (the
first engine ``--engine-option UCI_LimitStrength=true --engine-option UCI_Elo=1350 --engine-tc 60+0.6``), it is the
one pinned, at 1350: every rung's outside rating is then on the scale itself.

    python docs/outside/rung_pairs.py scratch/outside-rungs/*.json
"""
from __future__ import annotations

import json
import math
import os
import sys

SCALE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "alphazero_hpc", "evaluate", "scale.json")
SLOPE = math.log(10) / 400


def rung(engine: str, options: list[str], depth: int, tc: str | None = None) -> str:
    """The scale's name of an engine at a skill level or a UCI_Elo, searching to ``depth`` or on a clock ``tc``
    (``BASE+INC`` seconds, outside_match.py's ``--engine-tc``)."""
    name = os.path.basename(engine.split()[0])
    values = {o.partition("=")[0].strip(): o.partition("=")[2].strip() for o in options}
    parts = []
    if "Skill Level" in values:
        parts.append(f"skill={int(values['Skill Level'])}")
    if values.get("UCI_LimitStrength", "").lower() == "true" and "UCI_Elo" in values:
        parts.append(f"elo={int(values['UCI_Elo'])}")
    if not parts or not (depth or tc):
        raise SystemExit(f"{engine} {options}: not a rung (a skill level or a UCI_Elo, and a depth or a clock)")
    if tc:
        base, _, inc = tc.partition("+")
        parts.append(f"tc={float(base):g}+{float(inc or 0):g}")
    else:
        parts.append(f"depth={depth}")
    return f"{name}:{','.join(parts)}"


def diff(w: float, d: float, l: float) -> tuple[float, float]:
    """Elo difference of a W-D-L and its standard error (the trinomial variance, as outside_match.py's interval)."""
    n = w + d + l
    mu = (w + d / 2) / n
    var = (w * (1 - mu) ** 2 + d * (0.5 - mu) ** 2 + l * mu ** 2) / n
    elo = -400 * math.log10(1 / mu - 1)
    return elo, math.sqrt(var / n) / (SLOPE * mu * (1 - mu))


def chain(pairs: list[tuple[str, str, float, float]], pinned: str, rating: float) -> dict[str, tuple[float, float]]:
    """Maximum-likelihood ratings from (first, second, first's points, games), ``pinned`` fixed (Newton's method), each
    with its standard error relative to ``pinned`` (the inverse of the information; games as win-or-loss coins, so
    draws make it a little wider than the trinomial's)."""
    players = sorted({p for a, b, _, _ in pairs for p in (a, b)} - {pinned})
    r = {p: rating for p in players} | {pinned: rating}
    for _ in range(100):
        grad = {p: 0.0 for p in players}
        hess = {(p, q): 0.0 for p in players for q in players}
        for a, b, pts, n in pairs:
            e = 1 / (1 + 10 ** ((r[b] - r[a]) / 400))
            g, h = (pts - n * e) * SLOPE, n * e * (1 - e) * SLOPE ** 2
            for p, q, sign in ((a, b, 1.0), (b, a, -1.0)):
                if p in grad:
                    grad[p] += sign * g
                    hess[(p, p)] += h
                    if q in grad:
                        hess[(p, q)] -= h
        step = solve([[hess[(p, q)] for q in players] for p in players], [grad[p] for p in players])
        for p, s in zip(players, step):
            r[p] += s
        if max(abs(s) for s in step) < 1e-6:
            break
    info = [[hess[(p, q)] for q in players] for p in players]
    se = {p: math.sqrt(solve(info, [1.0 if q == p else 0.0 for q in players])[i]) for i, p in enumerate(players)}
    return {p: (r[p], se.get(p, 0.0)) for p in r}


def solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(m[i][c]))
        m[c], m[p] = m[p], m[c]
        for i in range(c + 1, n):
            f = m[i][c] / m[c][c]
            m[i] = [x - f * y for x, y in zip(m[i], m[c])]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(SCALE) as f:
        table = json.load(f)
    ratings = {r["name"]: r["elo"] for r in table["rungs"]}
    package = {(p["first"], p["second"]): (p["wins"], p["draws"], p["losses"]) for p in table["pairs"]}
    outside = []
    print(f"{'pair':<64} {'outside':>24}  {'package, same pair':>26}  {'table':>6}")
    for path in sys.argv[1:]:
        with open(path) as f:
            s = json.load(f)
        a = s["args"]
        if a.get("engine_depth", 0) == 0 and not a.get("engine_tc"):
            raise SystemExit(f"{path}: the first engine played neither at a depth (--engine-depth) nor on a clock "
                             "(--engine-tc): not two rungs")
        first = rung(a["engine"], a["engine_option"], a["engine_depth"], a.get("engine_tc"))
        second = rung(a["opponent"], a["opponent_option"], a["opponent_depth"], a.get("opponent_tc"))
        w, d, l = s["wins"], s["draws"], s["losses"]
        outside.append((first, second, w + d / 2, w + d + l))
        o, o_se = diff(w, d, l)
        if (first, second) in package:
            pw, pd, pl = package[(first, second)]
        elif (second, first) in package:
            pl, pd, pw = package[(second, first)]
        else:
            pw = pd = pl = 0
        fitted = ratings[first] - ratings[second]
        line = f"{first + ' - ' + second:<64} {w}-{d}-{l} {o:+5.0f} +-{1.96 * o_se:3.0f}"
        if pw + pd + pl:
            p, p_se = diff(pw, pd, pl)
            line += f"  {pw}-{pd}-{pl} {p:+5.0f} +-{1.96 * p_se:3.0f} ({(o - p) / math.hypot(o_se, p_se):+.1f} se)"
        else:
            line += f"  {'not played':>26}"
        line += f"  {fitted:+6.0f} ({(o - fitted) / o_se:+.1f} se)"
        print(line + ("  [stopped]" if s.get("stopped") else ""))
    played = {p for a, b, _, _ in outside for p in (a, b)}
    top = table["anchor"] if table["anchor"] in played else max(played, key=lambda p: ratings[p])  # the anchor if played
    fit = chain(outside, top, ratings[top])
    print(f"\nfrom the outside games alone, {top} pinned at its table rating {ratings[top]:.0f}:")
    for p in sorted(fit, key=lambda p: -fit[p][0]):
        elo, se = fit[p]
        print(f"  {p:<40} {elo:6.0f} +-{1.96 * se:3.0f}   table {ratings[p]:6.0f}   {elo - ratings[p]:+5.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
