"""``azhpc bench learning``: which search turns a CPU budget into the most chess strength.

Each arm is the config with the overrides that define it (PUCT; Gumbel at 8 and 16 simulations, with and
without ``train.value_target_q_ratio``; a 4x64 net in bf16 and its variants), every field it was measured with
named, so that ``configs/learn.yaml`` can become the best arm without changing what the others mean. Every arm
runs the local pipeline (self-play, then training, generation after generation) from the same random network
until it has used ``budget_cpu_hours`` of CPU time (user + system of every process it started: self-play tasks,
search workers, training ranks, data loaders; measured, not estimated). Then every network of every arm plays
random, and each arm's last network also plays greedy and Stockfish at a low node count, by the rules of chess
only (no material adjudication). All matches go into one maximum-likelihood ladder with random at 0, so arms
compare on one scale, and ``azhpc plot OUT`` draws Elo against CPU-hours for every arm in one figure.

The arms run one after the other: the machine is the same for each, and CPU time, not wall time, is the
budget, so a busy machine slows an arm down without changing what it gets.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import AzhpcError
from ..evaluate.elo import MatchScore, fit_ratings, ladder_table
from ..evaluate.ladder import player_label
from ..evaluate.ledger import read_ledger
from ..evaluate.runner import describe, evaluate
from ..evaluate.scale import SCALE_NAME, counts_in_fit, has_engine_rung, load_scale, rate_on_scale, scale_fit
from ..launch.resume import resume
from ..launch.start import launch
from ..net.precision import cpu_model
from ..report.follow import run_local_foreground
from ..store import atomic
from ..store.paths import BenchmarkPaths, RunPaths
from ..store.runconfig import read_run_config, run_config_if_any

# Every arm names the fields it was measured with, so that configs/learn.yaml (the best arm) can change without
# changing what an arm means. The 2x32 arms as they ran while learn.yaml was that net (configs/learn-2x32.yaml):
_SMALL = ("model.blocks=2", "model.filters=32", "selfplay.games_in_flight=16", "selfplay.games_per_generation=96",
          "selfplay.games_per_shard=8", "mcts.precision=auto", "train.amp=auto")


def _big(blocks: int) -> tuple[str, ...]:
    """A net of ``blocks`` x 64 filters, batches of 64 and bf16 arithmetic in search and training where the CPU has
    bf16 instructions (bf16-if-native; float32 elsewhere, where emulated bf16 searched at 0.16x and trained at 0.08x):
    on a CPU with native bf16 the 4x64 net searches at 1.63x its float32 speed, 0.75x the 2x32 net's
    (docs/performance.md). Every arm measured before 2026-12-02 ran on such a CPU, so it ran as bf16 did."""
    return (f"model.blocks={blocks}", "model.filters=64", "selfplay.games_in_flight=64", "selfplay.games_per_generation=128",
            "selfplay.games_per_shard=16", "mcts.precision=bf16-if-native", "train.amp=bf16-if-native")


def _gumbel(simulations: int, q_ratio: float) -> tuple[str, ...]:
    """Gumbel search at ``simulations`` (a quarter of them on fast moves), value targets mixed with q at ``q_ratio``,
    mates in one left to the network (arm 4x64-mate turns the proof on), plain input planes (4x64-attacks adds the
    attack maps, 4x64-tactics the pins and double attacks too), residual blocks without squeeze-excitation
    (4x64-se adds it), 16 moves considered at the root (4x64-m4 considers 4), the root's value the mean of its visits
    (4x64-qi, 6x64-qi: the improved policy's expected q), leaf values from the network alone (4x64-capture adds the
    material a capture wins)."""
    return ("mcts.algorithm=gumbel", f"mcts.simulations={simulations}", f"mcts.fast_simulations={simulations // 4}",
            f"train.value_target_q_ratio={q_ratio}", "mcts.mate_in_one=false", "model.attack_planes=false",
            "model.tactic_planes=false", "model.se_ratio=0", "mcts.gumbel_considered=16", "mcts.gumbel_root_value=visits",
            "mcts.leaf_capture_value=0")


def _training(replay_ratio: float = 3, window_generations: int = 3, lr_decay: float = 1,
              horizon: int = 0) -> tuple[str, ...]:
    """The trainer's share of an arm; the defaults are how every arm before 4x64-rr8 trained (the root value mixed into
    a value target is the position's own: 4x64-td4 takes it 4 plies later)."""
    return (f"train.replay_ratio={replay_ratio}", f"train.window_generations={window_generations}",
            f"train.lr_decay={lr_decay}", f"train.value_target_horizon={horizon}")


_PUCT = ("mcts.algorithm=puct", "mcts.simulations=24", "mcts.fast_simulations=6", "train.value_target_q_ratio=0",
         "mcts.mate_in_one=false", "model.attack_planes=false", "model.tactic_planes=false", "model.se_ratio=0",
         "mcts.leaf_capture_value=0")
# 6x64-rr2, the arm configs/learn.yaml is (BEST_ARM): an arm that changes one thing of it adds that override to this
_RECIPE = (*_gumbel(16, 0.5), *_big(6), *_training(replay_ratio=2, window_generations=6), "mcts.mate_in_one=true",
           "model.attack_planes=true")
ARMS: dict[str, tuple[str, ...]] = {
    "puct": (*_PUCT, *_SMALL, *_training()),  # AlphaZero's PUCT as the toolkit ran it before Gumbel search
    "gumbel8": (*_gumbel(8, 0), *_SMALL, *_training()),
    "gumbel8-q": (*_gumbel(8, 0.5), *_SMALL, *_training()),
    "gumbel16": (*_gumbel(16, 0), *_SMALL, *_training()),
    "gumbel16-q": (*_gumbel(16, 0.5), *_SMALL, *_training()),
    "4x64-bf16": (*_gumbel(16, 0.5), *_big(4), *_training()),  # gumbel16-q with the 4x64 net in bf16
    # 4x64-bf16 with twice the simulations per move: 4x64-bf16 stopped climbing after ~0.6 CPU-hours with a value
    # head that knows material, so this arm buys better search targets with half the games
    "4x64-g32": (*_gumbel(32, 0.5), *_big(4), *_training()),
    # 4x64-bf16 with a learning rate that falls over the run (train.lr_decay 0.985 per generation: half at
    # generation 46, 0.26 at 88, where its 2 CPU-hours ended). Tried because 4x64-bf16 and 4x64-g32 stopped near 500;
    # it did worse (213 against 490-520, docs/evaluation-log.md): kept as a measured negative
    "4x64-decay": (*_gumbel(16, 0.5), *_big(4), *_training(lr_decay=0.985)),
    # 4x64-bf16 with 8 training samples per new position over the last 6 generations (3 over 3): its 2 CPU-hours made
    # only ~11k SGD steps, training was ~12% of the CPU, and the falling rate did worse, so this buys more learning
    # per game with the rate kept, from a wider window so the extra steps do not refit the newest games
    "4x64-rr8": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6)),
    # 4x64-rr8 with 6 residual blocks: every 4x64 arm stopped at 500-600 from 0.6 to 2 CPU-hours whatever the search or
    # the training did, and the one lever that moved the scale was capacity (2x32 -> 4x64: +317); the supervised
    # track's 6x64 net reached 1250 in the same budget, so this depth can hold more than the self-play nets learned.
    # It did not climb faster: 436 at 1.03 CPU-hours, 510 at 2.02 (4x64-rr8: 567), intervals overlapping
    "6x64-rr8": (*_gumbel(16, 0.5), *_big(6), *_training(replay_ratio=8, window_generations=6)),
    # 4x64-rr8 taught to convert: its 2 CPU-hour networks drew most games against greedy by the fifty-move rule a
    # queen or more ahead, because self-play never played a won position out (the loser resigned, or a repetition or
    # ply 120 scored the side ahead a win on material, worth a mate). Here a game won on material teaches a win only
    # half the time (else a draw), repetitions and stalls are draws, and games run to ply 160: a mate is worth more
    "4x64-convert": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6),
                     "selfplay.max_plies=160", "selfplay.adjudicate_rule_draws=false", "selfplay.adjudicated_win_share=0.5"),
    # 4x64-rr8 whose search proves mates in one (mcts.mate_in_one) in self-play and in its matches: the 2 CPU-hour
    # network played 21 of the 125 mates in one it had on the board and allowed 72 avoidable ones, the mating move
    # outside the 16 moves Gumbel considers. Self-play's improved policy then points at mates, and q sees them
    "4x64-mate": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6), "mcts.mate_in_one=true"),
    # 4x64-mate with the attack maps as 4 more input planes (model.attack_planes: squares each side attacks, pieces of
    # each side en prise): the 2 CPU-hour networks lost by leaving pieces to one-move tactics, and four times the
    # search at play time did not save them; a net this small learns slowly what the rules can tell it
    "4x64-attacks": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6), "mcts.mate_in_one=true",
                     "model.attack_planes=true"),
    # 4x64-attacks whose residual blocks end in squeeze-excitation (model.se_ratio 4, as lc0's nets: each block
    # rescales and shifts its channels from their board-wide means, a global view of material and king safety that
    # 3x3 convolutions reach only through depth). Its 717 network's value head knows material on its own positions
    # (correlation 0.88) and four times its search beat its 96-simulation self +19 =2 -3, yet gained little against
    # the rungs: what it misses is in the net's judgement, not in the search's depth
    # Measured at 1 CPU-hour: 654 [564, 743] (25 generations) against 4x64-attacks' 685 [594, 775]: no gain
    "4x64-se": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6), "mcts.mate_in_one=true",
                "model.attack_planes=true", "model.se_ratio=4"),
    # 4x64-attacks with 4 more planes from the rules (model.tactic_planes): each side's pieces pinned to its king and
    # the squares each side attacks twice or more. The attack maps were the one lever that lifted the self-play nets
    # above 600 (+105 at 2 CPU-hours); what the first set cannot show is a pin and the count of an exchange
    # Measured at 1 CPU-hour: 674 [584, 764] (26 generations) against 4x64-attacks' 685 [594, 775]: no gain
    "4x64-tactics": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6), "mcts.mate_in_one=true",
                     "model.attack_planes=true", "model.tactic_planes=true"),
    # 4x64-attacks whose Gumbel root considers 4 moves instead of 16. At 16 simulations over 16 moves sequential
    # halving gives each move one visit: the search's q of a move is the value head's reading of the position after
    # it, with the opponent to move, which is exactly what the 717 network misjudges (a piece about to be taken).
    # Over 4 moves each gets two visits, the second one into the opponent's reply, so q sees the capture; the moves
    # the prior and the noise rank below 4 are left to the improved policy's completed values.
    # Measured at 1 CPU-hour: 206 [109, 303] (24 generations) against 4x64-attacks' 685 [594, 775]: far worse; kept as
    # a measured negative (breadth at the root is what 16 simulations buy)
    "4x64-m4": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6), "mcts.mate_in_one=true",
                "model.attack_planes=true", "mcts.gumbel_considered=4"),
    # 4x64-attacks whose value targets mix in the improved policy's expected q (mcts.gumbel_root_value=improved)
    # instead of the mean over the root's visits. Sequential halving visits 16 moves once each, so that mean averages
    # the good move with 15 others: where the side to move can take a hanging piece, the mean hardly moves and the
    # value head is never told that such a position is good, the reading the 717 network lacks. The improved
    # policy's weights sit on the capture, so its q does tell it. Resignation reads the same value, so this arm's
    # games also resign on the improved value.
    # Measured at 1 CPU-hour: 666 [575, 757] (26 generations) against 4x64-attacks' 685 [594, 775]: no gain
    "4x64-qi": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6), "mcts.mate_in_one=true",
                "model.attack_planes=true", "mcts.gumbel_root_value=improved"),
    # 4x64-attacks whose search adds to each leaf's value the material its side to move can win at once by one
    # capture (mcts.leaf_capture_value=0.5 logit per pawn; game.attacks.capture_gain, a static estimate from the rules).
    # The 717 network's value head ignores a piece about to be taken, and at 16 simulations over 16 root moves each
    # move gets one visit: its q is the value of the position after it, where the opponent can take what it left
    # hanging. With the gain in the leaf value that one visit sees the loss, so the improved policy (the policy
    # target), the root's value (mixed into the value targets) and the rated network's play all avoid it.
    # Measured at 1 CPU-hour (Intel Xeon, 2026-11-26): 537 [448, 627] (24 generations) against 4x64-attacks' 642
    # [552, 733] (26) side by side on the same machine: no gain, likely a loss; kept as a measured negative
    "4x64-capture": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6), "mcts.mate_in_one=true",
                     "model.attack_planes=true", "mcts.leaf_capture_value=0.5"),
    # 4x64-attacks whose value targets mix in the search's root value 4 plies later in the same game instead of the
    # position's own (train.value_target_horizon=4; a TD(n) target, the result past the game's last recorded
    # position). The 717 network's value head reads the material on the board, not material about to change hands,
    # and the root value of the same position inherits that blind spot; 4 plies on, an exchange or a piece left en
    # prise has been played out and the value head reads the material it left, so the target of the earlier
    # position learns what is pending in it. The capture bonus (4x64-capture) put a hand-made count in the search;
    # this keeps the search and teaches the network from its own later readings.
    # Measured at 1 CPU-hour (Intel Xeon, 2026-11-26): 660 [570, 750] (23 generations) against 4x64-attacks' 701
    # [612, 790] (24) side by side on the same machine: no gain; kept as a measured negative
    "4x64-td4": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6, horizon=4),
                 "mcts.mate_in_one=true", "model.attack_planes=true"),
    # 4x64-attacks at twice the learning rate (train.lr=0.1 per 256 samples). A rate that fell over the run cost
    # ~300 on the scale (4x64-decay), so the rate is a strong lever and the constant 0.05 may be below the best;
    # the 1- and 2-CPU-hour points of 4x64-attacks differ by only 7-30, as if the net stopped following its data.
    # Measured at 1 CPU-hour (Intel Xeon, 2026-11-26): 701 [617, 786] (26 generations), the base's 642-701 over three
    # runs: no gain; kept as a measured negative
    "4x64-lr2": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6),
                 "mcts.mate_in_one=true", "model.attack_planes=true", "train.lr=0.1"),
    # 4x64-attacks whose games sample moves for their first 16 plies instead of 40 (selfplay.temperature_plies).
    # Games last ~100 plies: with 40 noisy plies a game's result, half of every value target, says as much about the
    # sampled opening moves as about the positions after them; 16 plies still open 128 games a generation differently.
    # Measured at 1 CPU-hour (Intel Xeon, 2026-11-26): 660 [568, 752] (26 generations): no gain; a measured negative
    "4x64-t16": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6),
                 "mcts.mate_in_one=true", "model.attack_planes=true", "selfplay.temperature_plies=16"),
    # 4x64-attacks with a tenth of Gumbel's sigma scale (mcts.gumbel_c_scale=0.1). sigma rescales the completed q
    # over the moves to [0, 1] and multiplies by (c_visit + max visits) * c_scale: at 16 simulations, one visit per
    # move, the best q gets 51 logits over the worst and the policy target is close to one-hot on the move whose
    # single value-head reading is highest, the reading that is wrong where captures are pending. At 0.1 (5 logits)
    # the target still moves toward q but keeps the prior's ranking of close moves. Measured at 1 CPU-hour (Intel
    # Xeon, 2026-11-27, beside 4x64-w12): 670 [582, 758] (24 generations), against the base's 642-701: no gain
    "4x64-cs01": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6),
                  "mcts.mate_in_one=true", "model.attack_planes=true", "mcts.gumbel_c_scale=0.1"),
    # 4x64-attacks with a third head trained to predict the material that the side to move gains over the next 4
    # plies of its game (model.material_head; train.material_horizon 4, train.material_weight 1). The value and the
    # search stay as they are; the tower must learn what is about to be taken (KataGo's ownership and score heads
    # teach its tower the same way). The 717 network's value head knew the material on the board, not the material
    # about to change hands, and the levers that changed the value target (4x64-td4) or the search (4x64-capture)
    # did not help. Measured at 1 CPU-hour (Intel Xeon, 2026-11-26): 673 [584, 762] (26 generations), against the
    # base's 642-701: no gain (run before de9f0dd, so its networks were served with batch norms unfolded)
    "4x64-material": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=6),
                      "mcts.mate_in_one=true", "model.attack_planes=true", "model.material_head=true"),
    # 4x64-attacks drawing its 8 training samples per new position from the last 12 generations, not 6: from 1 to 2
    # CPU-hours the base gained ~20 (685-701 -> 708-717), as if it had stopped learning at a ~700 plateau; a window of
    # 6 generations is ~34 k positions, each seen ~8 times in ~6 generations of a moving target, and a wider window
    # (AlphaZero's was the last 500 k games) trades fresher targets for more varied ones. Measured at 1 CPU-hour
    # (Intel Xeon, 2026-11-27, beside 4x64-cs01): 630 [545, 715] (24 generations): no gain, if anything a loss
    "4x64-w12": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=8, window_generations=12),
                 "mcts.mate_in_one=true", "model.attack_planes=true"),
    # 4x64-attacks at half the training per new position (train.replay_ratio 4, not 8, over the same 6 generations):
    # in an arm the trainer takes about half of the CPU (357 steps of ~0.18 s in a generation of ~140 CPU-seconds,
    # 2026-11-27), so 4 samples per position buy more self-play for the budget. Measured at 1 CPU-hour (Intel Xeon,
    # 2026-11-27, alone): 758 [671, 845] (41 generations, 242 k positions, against the base's 24-29 and 157 k), the
    # best 1-CPU-hour point so far, its interval overlapping the base's best (701); at 2 CPU-hours 755 [668, 843]
    "4x64-rr4": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=4, window_generations=6),
                 "mcts.mate_in_one=true", "model.attack_planes=true"),
    # a quarter of the base's training per position, measured beside 4x64-rr4 at 2 CPU-hours (Intel Xeon, 2026-11-27):
    # 790 [700, 879] (94 generations, 523 k positions) against 4x64-rr4's 755 [668, 843] (83, 470 k; 758 at 1 CPU-hour)
    "4x64-rr2": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=2, window_generations=6),
                 "mcts.mate_in_one=true", "model.attack_planes=true"),
    # one training sample per new position: 8, 4 and 2 samples rated 708-717, 755 and 790 at 2 CPU-hours, each point
    # above the last, and at 2 samples the trainer was ~15% of a generation's CPU, so this asks whether fewer steps
    # per position (less refitting of the window) go on helping, not whether they buy more games.
    # Measured at 1 CPU-hour (Intel Xeon, 2026-11-27, beside 6x64-rr2): 810 [722, 898] (48 generations, 289 k
    # positions), against 4x64-rr4's 758 at 1.02: the best point at 1 CPU-hour, intervals overlapping; at 2 CPU-hours
    # 798 [714, 881] (103 generations, 569 k positions) against 4x64-rr2's 790: level, and no climb from 1 to 2
    "4x64-rr1": (*_gumbel(16, 0.5), *_big(4), *_training(replay_ratio=1, window_generations=6),
                 "mcts.mate_in_one=true", "model.attack_planes=true"),
    # 4x64-rr1 at half the search: 8 simulations (2 on fast moves) over the prior's top 8 moves, one visit each, as
    # 16 over 16 was. Each step of less training per position bought more positions for the budget and rated higher
    # (8, 4, 2, 1 samples); at 1 sample self-play is ~90% of the CPU, so the search is what is left to trade for
    # positions: ~2x the positions against a one-ply improved policy over 8 moves instead of 16. Measured at 1
    # CPU-hour (Intel Xeon, 2026-11-27, beside 6x64-rr2 and 4x64-g32m8): 674 [584, 764] (55 generations, 333 k
    # positions, only 1.15x 4x64-rr1's 289 k: the search is not most of a generation's CPU) against 4x64-rr1's 810
    "4x64-g8": (*_gumbel(8, 0.5), *_big(4), *_training(replay_ratio=1, window_generations=6),
                "mcts.mate_in_one=true", "model.attack_planes=true", "mcts.gumbel_considered=8"),
    # 4x64-rr1 searching deeper: 32 simulations (8 on fast moves) over 8 considered moves. At 16 over 16 every
    # considered move gets one visit, so the policy target is the prior improved by the value head's one-ply reading
    # and the root value is the mean of those 16 readings: the recipe levels off near 800 from 1 CPU-hour at every
    # replay ratio, as if it had reached that fixed point. Here sequential halving gives the last two moves ~11
    # visits each (8x1, 4x2, 2x10), lines 2-3 plies deep, for about twice the simulations per move. Measured at 1
    # CPU-hour (Intel Xeon, 2026-11-27, alone for its last fifth): 705 [617, 793] (26 generations, 185 k positions,
    # 0.040 CPU-hours a generation against 4x64-rr1's 0.021) against 4x64-rr1's 810: deeper targets did not pay
    "4x64-g32m8": (*_gumbel(32, 0.5), *_big(4), *_training(replay_ratio=1, window_generations=6),
                   "mcts.mate_in_one=true", "model.attack_planes=true", "mcts.gumbel_considered=8"),
    # 4x64-rr2 with 6 residual blocks: at 2 samples per position the trainer's CPU fell to ~15% of a generation, and
    # the supervised track's 6x64 net held 1250 where every 4x64 self-play recipe stopped near 750-790 from 1 CPU-hour
    # on. 6x64-rr8 did not gain over 4x64-rr8 (510 against 567 at 2 CPU-hours) when training took a third of the CPU.
    # Measured at 1 CPU-hour (Intel Xeon, 2026-11-27, beside 4x64-rr1): 786 [697, 876] (36 generations, 221 k positions);
    # at 2 CPU-hours 813 [723, 904] (70 generations, 405 k positions), the best point at the full budget
    "6x64-rr2": _RECIPE,
    # 6x64-rr2 with 8 residual blocks: the search per move is settled (half of it and twice of it both lost at 1
    # CPU-hour), and the one lever still climbing at 2 CPU-hours is the net's size (4 blocks level near 800 from 1
    # CPU-hour on, 6 blocks 786 -> 813). ~1.3x a 6-block generation's CPU, so ~55 generations in the budget.
    # Measured at 1 CPU-hour (Intel Xeon, 2026-11-27, at nice 19 beside a PUCT-800 rating): 747 [658, 836] (27
    # generations, 170 k positions) against 6x64-rr2's 786 and 4x64-rr1's 810: the bigger net starts slower again.
    # At 2 CPU-hours (AMD EPYC, 2026-11-27, another run): 804 [718, 890] (72 generations, 406 k positions), between
    # 6x64-rr2's two runs (813, 790), and 893 [803, 983] at PUCT 800 (theirs 1039, 915): no gain for ~1.2x the CPU
    # a generation. On a Zen 5 (2026-12-06, seed 19; 143 generations, 749 k positions): 978 [881, 1076] at PUCT 1600,
    # T=3, tree reuse, against 1075 and 981 for 6x64-rr2 on the same CPU model: no gain at twice the positions either
    "8x64-rr2": (*_gumbel(16, 0.5), *_big(8), *_training(replay_ratio=2, window_generations=6),
                 "mcts.mate_in_one=true", "model.attack_planes=true"),
    # 6x64-rr2 searching deeper: 32 simulations (8 on fast moves) over 8 considered moves, as 4x64-g32m8 was. On a
    # Zen 5 the recipe records twice the positions of the Zen 4 runs (858-863 k against ~420 k) and rates no higher
    # (1075 and 981 against the eleven runs' 987), and a bigger net did not use them either (8x64-rr2, 978): the
    # positions are not what it lacks. At 16 over 16 the policy target is the prior improved by one reading of the
    # value head per move; here the last two moves get ~10 visits each, lines 2-3 plies deep, for ~2x the CPU a
    # position. 4x64-g32m8 lost at 1 CPU-hour on an Intel (705 against 810), when positions were what was short.
    # Measured on a Zen 5 (2026-12-06, seed 20): 86 generations, 590 k positions in 2.009 CPU-hours, 951 [855, 1047]
    # at PUCT 1600, T=3, tree reuse, against 1075 and 981 for 6x64-rr2 on the same CPU model: no gain
    "6x64-g32m8": (*_gumbel(32, 0.5), *_big(6), *_training(replay_ratio=2, window_generations=6),
                   "mcts.mate_in_one=true", "model.attack_planes=true", "mcts.gumbel_considered=8"),
    # 6x64-rr2 whose value targets mix in the improved policy's expected q (mcts.gumbel_root_value=improved, as
    # 4x64-qi did) instead of the mean of the root's visits (its own reading and 16 one-visit readings). At the
    # documented play setting (PUCT 1600) the value head decides most of the strength, and a mean over 16 considered
    # moves, most of them poor, teaches it a position is worth what an average move leaves; the improved policy sits
    # on the best reading, so its q is a one-ply maximum, the backup a deeper search would give the root's value.
    # 4x64-qi rated level with its base at 1 CPU-hour (666 against 685) when ratings were at Gumbel 96, a search that
    # leans on the prior.
    # Measured on a Zen 5 (2026-12-06, seed 21): 145 generations, 914 k positions in 2.005 CPU-hours, 1037 [941, 1133]
    # at PUCT 1600, T=3, tree reuse, against 1075 and 981 for 6x64-rr2 on the same CPU model (mean 1028) and the
    # eleven runs' 987: level with the recipe on its own CPU, one run, no shown gain. Again on a Zen 4 (2026-12-07,
    # seed 24): 86 generations, 532 k positions in 2.020 CPU-hours, 1018 [918, 1119] against 964 for the recipe's seed
    # 22 there: two runs at a mean of 1028 against the twelve recipe runs' 985, about one standard error, not shown
    "6x64-qi": (*_RECIPE, "mcts.gumbel_root_value=improved"),
    # 6x64-rr2 with a tenth of Gumbel's sigma scale, as 4x64-cs01 was (mcts.gumbel_c_scale=0.1): the improved policy
    # target moves toward q by at most ~5 logits instead of ~51, so the prior keeps its ranking of close moves. At the
    # documented play setting the networks rate +105 and +142 higher with their priors flattened at play (T=3): the
    # recipe's one-hot targets make priors too sharp for PUCT. 4x64-cs01 rated level with its base at 1 CPU-hour
    # (670 against 642-701) when ratings were at Gumbel 96, a search that reads the prior's top 16 moves alike.
    # Measured on a Zen 4 (2026-12-07, seed 23): 85 generations, 489 k positions in 2.006 CPU-hours, 750 [648, 853]
    # at PUCT 1600, T=3, tree reuse, against 964 for 6x64-rr2 (seed 22) on the same CPU model and the twelve runs'
    # 985: a clear loss, and its priors end sharper, not flatter (mean top-move probability 0.565 against 0.483 on
    # seed 22's own games): a target that only nudges the prior lets the prior sharpen on itself
    "6x64-cs01": (*_RECIPE, "mcts.gumbel_c_scale=0.1"),
    # 6x64-rr2 with self-play (and play) on the network quantized to int8 (mcts.precision=int8, net/quantize.py),
    # trained in float32 as before. On a CPU without bf16 the recipe runs in float32 (bf16-if-native) and made 0.4x
    # the positions of a Zen 4 in bf16 (seed 25 on a Zen 3: 162 k, 808 [708, 907]); int8 measured 1.38x float32's
    # simulations/s there (2.19x on a Zen 4), so this buys back positions where bf16 cannot.
    # Measured on that Zen 3 (2026-12-07, seed 26): 33 generations, 205 k positions in 2.065 CPU-hours, 941 [841, 1040] at
    # PUCT 1600, T=3, tree reuse, in int8 (100 games), against 808 [708, 907] for seed 25 in float32 there
    "6x64-int8": (*_RECIPE, "mcts.precision=int8"),
}
# configs/learn.yaml is this arm (issue 28: the config becomes the best arm measured on the scale): 813 [723, 904]
# after 2.02 CPU-hours, the best point at the full budget (4x64-rr1 798, 4x64-rr2 790, 4x64-rr4 755, 4x64-attacks
# 717 and 708), every interval overlapping its neighbour's
BEST_ARM = "6x64-rr2"
# Every arm runs on one machine's CPUs, evaluates nothing while it trains and gets no material adjudication in
# its matches (self-play adjudication is the config's: it is part of how an arm learns).
COMMON = ("eval.enabled=false", "slurm.gpus_per_node=0")


@dataclass(frozen=True)
class ArmResult:
    name: str
    overrides: tuple[str, ...]
    generations: int  # networks trained (models/gen-1 .. gen-N)
    cpu_s: list[float]  # CPU seconds used by the end of each generation's training
    wall_s: float
    # CPU seconds that stopped attempts at the next generation used (a benchmark stopped with SIGTERM or Ctrl-C
    # mid-generation, whose shards and training state the next attempt keeps): counted when that generation ends
    unfinished_cpu_s: float = 0.0
    # the CPU model that finished each generation -> how many generations it finished (an arm resumed on a machine
    # with another CPU model names both: CPU-hours buy different amounts of work on different CPUs; a generation
    # stopped on one and finished on another counts for the second); empty in summaries from before 2026-12-03
    cpus: dict[str, int] = field(default_factory=dict)

    def cpu_line(self) -> str:
        """The CPUs the arm's generations ran on, e.g. "Intel Xeon (family 6 model 167) (70 generations)"."""
        counts = dict(self.cpus)
        unrecorded = self.generations - sum(counts.values())
        if unrecorded > 0:
            counts["CPU not recorded"] = unrecorded
        return "; ".join(f"{cpu} ({n} generation{'' if n == 1 else 's'})" for cpu, n in counts.items()) or "no generations"


def children_cpu_s() -> float:
    """User + system CPU seconds of every finished child process of this one (and of their children)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def train_arm(out: BenchmarkPaths, name: str, config: Path, overrides: Sequence[str], budget_s: float,
              echo: Callable[[str], None], max_generations: int = 1000) -> ArmResult:
    """Generations of the local pipeline until the arm has used ``budget_s`` CPU seconds (the generation that
    crosses the budget finishes). An arm whose folder exists continues from it; the CPU that a stopped attempt at a
    generation used (stopped by SIGTERM or SIGINT, whose children the supervisor reaps) counts as spent as well."""
    paths = out.arm(name)
    cpu_s: list[float] = []
    cpus: dict[str, int] = {}
    t0, c0 = time.perf_counter(), children_cpu_s()
    previous = _previous(out, name)
    if previous is not None:  # a benchmark started again: the arm's finished generations count as spent
        cpu_s, cpus = list(previous.cpu_s), dict(previous.cpus)
        c0 -= (cpu_s[-1] if cpu_s else 0.0) + previous.unfinished_cpu_s
    here = cpu_model()
    g = len(cpu_s)
    while (not cpu_s or cpu_s[-1] < budget_s) and g < max_generations:
        try:
            if not _run_generation(paths, name, config, overrides, g, echo):
                raise AzhpcError(f"arm {name}: generation {g} failed or was stopped; azhpc status {paths.root} says "
                                 "why, and the same command continues it")
        except BaseException:  # stopped or failed: what this attempt used waits for the generation's end
            spent = children_cpu_s() - c0 - (cpu_s[-1] if cpu_s else 0.0)
            _save_arm(out, ArmResult(name, tuple(overrides), g, cpu_s, time.perf_counter() - t0, spent, cpus))
            raise
        g += 1
        cpu_s.append(children_cpu_s() - c0)
        cpus[here] = cpus.get(here, 0) + 1
        echo(f"[{name}] generation {g}: {cpu_s[-1] / 3600:.3f} of {budget_s / 3600:.3f} CPU-hours")
        _save_arm(out, ArmResult(name, tuple(overrides), g, cpu_s, time.perf_counter() - t0, cpus=cpus))
    return ArmResult(name, tuple(overrides), g, cpu_s, time.perf_counter() - t0, cpus=cpus)


def _run_generation(paths: RunPaths, name: str, config: Path, overrides: Sequence[str], g: int,
                    echo: Callable[[str], None]) -> bool:
    if not paths.launch_record.exists():
        launch(paths.root, config, [*overrides, *COMMON, "run.generations=1"], cluster="local", detach=False)
    else:
        result = resume(paths.root, generations=g + 1, detach=False)
        if result.gave_up:
            raise AzhpcError(f"arm {name}: " + "; ".join(result.gave_up))
    return run_local_foreground(paths.root, echo=lambda line: echo(f"[{name}] {line}"))


def _previous(out: BenchmarkPaths, name: str) -> ArmResult | None:
    try:
        arm = json.loads(out.summary.read_text())["arms"][name]
    except (OSError, ValueError, KeyError):
        return None
    return ArmResult(**{**arm, "overrides": tuple(arm["overrides"])})


def _save_arm(out: BenchmarkPaths, arm: ArmResult) -> None:
    try:
        summary = json.loads(out.summary.read_text())
    except (OSError, ValueError):
        summary = {"arms": {}}
    summary["arms"][arm.name] = asdict(arm)
    atomic.write_json(out.summary, summary, doing="writing the benchmark summary")


def evaluate_arm(out: BenchmarkPaths, arm: ArmResult, games: int, ladder_games: int, stockfish_nodes: int,
                 device: str, echo: Callable[[str], None], every: int = 1, scale: bool = False) -> None:
    """Every ``every``-th network of the arm against random (``ladder_games``), its last one against random, greedy
    and Stockfish (``games``), chess rules only, and with ``scale`` rated on the calibrated scale. Matches already
    in the arm's ledger are not played again."""
    paths = out.arm(arm.name)
    cfg = read_run_config(paths)
    for g in [*range(every, arm.generations, every), arm.generations]:
        opponents = ["random"] if g < arm.generations else ["random", "greedy", f"stockfish:skill=0,nodes={stockfish_nodes}"]
        for opponent in opponents:
            n = games if g == arm.generations else ladder_games
            entry, _ = evaluate(paths.root, cfg, g, opponent, games=n, device=device, adjudicate_material=0, seed=1)
            echo(f"[{arm.name}] {describe(entry)}")
    if scale:
        rating = rate_on_scale(paths.root, cfg, arm.generations, cfg.eval.scale_interval,
                               max_games=cfg.eval.scale_max_games, device=device, echo=lambda line: echo(f"[{arm.name}] {line}"),
                               jobs=cfg.eval.scale_jobs)
        echo(f"[{arm.name}] {rating.line()}")


def combined_ladder(out: BenchmarkPaths, arms: Sequence[ArmResult]) -> list[dict[str, Any]]:
    """One ladder over every arm's matches (players named ARM/gen:K; random, greedy and Stockfish shared)."""
    matches = []
    for arm in arms:
        paths = out.arm(arm.name)
        cfg = run_config_if_any(paths)
        for e in read_ledger(paths):
            if not counts_in_fit(e):  # as every fit
                continue
            player = f"{arm.name}/{player_label(e['player'], e, cfg)}"  # gen:K@puct400: another search or simulations
            opponent = e["opponent"] if not e["opponent"].startswith("gen:") else f"{arm.name}/{player_label(e['opponent'], e, cfg)}"
            matches.append((player, opponent, MatchScore(e["wins"], e["draws"], e["losses"])))
    if not matches:
        raise AzhpcError(f"no matches in the arms of {out.root}: evaluate them first")
    # on the calibrated scale (rungs pinned) when an arm played an engine rung; else random = 0
    on_scale = has_engine_rung(name for a, b, _ in matches for name in (a, b))
    ratings = scale_fit(matches, load_scale()) if on_scale else fit_ratings(matches, "random")
    table = [{"name": r.name, "elo": r.elo, "low": r.low, "high": r.high, "games": r.games} for r in ladder_table(ratings)]
    atomic.write_json(out.ladder, {"anchor": SCALE_NAME if on_scale else "random", "matches": len(matches), "ratings": table},
                      doing="writing the ladder")
    return table


def run_benchmark(out_dir: Path, config: Path, arm_names: Sequence[str], budget_cpu_hours: float, games: int = 40,
                  ladder_games: int = 10, stockfish_nodes: int = 100, device: str = "cpu", common: Sequence[str] = (),
                  echo: Callable[[str], None] = print, ladder_every: int = 1,
                  scale: bool = False) -> tuple[list[ArmResult], list[dict[str, Any]]]:
    """Train every arm on ``budget_cpu_hours`` (``common``: overrides for all of them, applied after each arm's own so
    that they win), evaluate, fit the ladder."""
    unknown = [a for a in arm_names if a not in ARMS]
    if unknown:
        raise AzhpcError(f"unknown arm(s) {', '.join(unknown)}: choose from {', '.join(ARMS)}")
    out = BenchmarkPaths(out_dir)
    budget_s = budget_cpu_hours * 3600
    arms = []
    for name in arm_names:
        echo(f"[{name}] training on {budget_cpu_hours:g} CPU-hours: {' '.join(ARMS[name]) or 'the config as it is'}")
        arms.append(train_arm(out, name, config, [*ARMS[name], *common], budget_s, echo))
    for arm in arms:
        evaluate_arm(out, arm, games, ladder_games, stockfish_nodes, device, echo, ladder_every, scale)
    return arms, combined_ladder(out, arms)


def render(arms: Sequence[ArmResult], ladder: Sequence[dict[str, Any]]) -> str:
    """A table: each arm's last network, its CPU-hours and generations, and its Elo with the 95% interval."""
    by_name = {r["name"]: r for r in ladder}
    scale = has_engine_rung(r["name"] for r in ladder)
    lines = [f"{'arm':<12} {'gens':>4} {'CPU-h':>6}  {'Elo (' + ('Stockfish 15.1 UCI_Elo scale' if scale else 'random = 0') + ')':>24}"]
    for arm in arms:
        r = by_name.get(f"{arm.name}/gen:{arm.generations}")
        elo = (f"{r['elo']:+.0f} [{r['low']:+.0f}, {r['high']:+.0f}]" if r and r["elo"] is not None else "unrated")
        lines.append(f"{arm.name:<12} {arm.generations:>4} {arm.cpu_s[-1] / 3600 if arm.cpu_s else 0:>6.3f}  {elo:>24}")
    anchors = [r for r in ladder if "/" not in r["name"] and r["elo"] is not None]
    lines.extend(f"{arm.name} trained on {arm.cpu_line()}" for arm in arms)
    lines.append("anchors: " + ", ".join(f"{r['name']} {r['elo']:+.0f} [{r['low']:+.0f}, {r['high']:+.0f}]" for r in anchors))
    return "\n".join(lines)
