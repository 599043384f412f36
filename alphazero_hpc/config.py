"""One typed configuration tree for a run.

Sections are frozen dataclasses; each field has a comment saying what it means and ``__post_init__``
validates ranges; a key with a fixed set of choices is typed as a ``Literal`` and checked by ``_check_choices``.
``load_config`` reads a YAML file from ``configs/`` and applies ``--set section.key=value`` overrides; an unknown key or a value of the wrong type raises ``ConfigError`` naming the key and the valid
choices. The resolved config is frozen into the run folder, every checkpoint and every shard.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence, cast

import yaml

from .errors import ConfigError

_SLURM_NAME = re.compile(r"^[A-Za-z0-9_.,-]*$")
POLICY_TEMPERATURES = (0.1, 10.0)  # the range of a prior's temperature (mcts, eval, --policy-temperature)


def _check(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"config value {key}: {msg}")


# The choices of the config's enumerated keys: each is checked by ``_check_choices``, and nowhere else.
Algorithm = Literal["puct", "gumbel"]
PlayAlgorithm = Literal["same", "puct", "gumbel"]
Interior = Literal["puct", "deterministic"]
RootValue = Literal["visits", "improved"]
Precision = Literal["auto", "bf16", "bf16-if-native", "float32", "int8"]
MoveGenerator = Literal["compiled", "python-chess"]
Compression = Literal["gzip", "lzf", "none"]
Amp = Literal["auto", "bf16", "bf16-if-native", "fp16", "off"]
LrSchedule = Literal["constant", "cosine"]
Repetitions = Literal[2, 3, 5]


def _choices(hint: Any) -> tuple[Any, ...]:
    """The values of a Literal type, else ()."""
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else ()


def _check_choices(section: object) -> None:
    """Every Literal-typed field of a section holds one of its choices (called first by each ``__post_init__``)."""
    name = {cls: n for n, cls in SECTIONS.items()}.get(type(section), type(section).__name__)
    for key, hint in typing.get_type_hints(type(section)).items():
        choices = _choices(hint)
        value = getattr(section, key)
        if choices and not any(value == c and type(value) is type(c) for c in choices):
            raise ConfigError(f"config value {name}.{key}: must be one of {', '.join(map(str, choices))}, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Residual network: input planes -> tower -> policy (4672 logits) and value (win/draw/loss) heads."""

    blocks: int = 2  # residual blocks in the tower
    filters: int = 32  # channels of every tower convolution
    se_ratio: int = 0  # squeeze-excitation reduction ratio; 0 disables SE
    history: int = 2  # positions of history in the input (AlphaZero: 8)
    value_hidden: int = 64  # width of the value head's hidden layer
    attack_planes: bool = False  # 4 more input planes from the rules: squares each side attacks, pieces en prise
    tactic_planes: bool = False  # 4 more after those (needs attack_planes): pinned pieces, squares attacked twice
    material_head: bool = False  # a third head, read in training only: how much material the side to move gains over
                                 # the next train.material_horizon plies of its game (an auxiliary target, as KataGo's
                                 # ownership: it teaches the tower what is about to be taken; search never calls it)

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(1 <= self.blocks <= 64, "model.blocks", "must be in 1..64")
        _check(8 <= self.filters <= 1024, "model.filters", "must be in 8..1024")
        _check(self.se_ratio == 0 or self.filters % self.se_ratio == 0, "model.se_ratio", "must divide filters (or be 0)")
        _check(1 <= self.history <= 8, "model.history", "must be in 1..8")
        _check(8 <= self.value_hidden <= 65536, "model.value_hidden", "must be in 8..65536")
        _check(self.attack_planes or not self.tactic_planes, "model.tactic_planes",
               "needs model.attack_planes: true (its planes follow the attack maps)")

    @property
    def attack_sets(self) -> int:
        """Sets of 4 attack maps at the end of the input planes (``game.attacks``): 0, 1 or 2."""
        return int(self.attack_planes) + int(self.tactic_planes)


@dataclass(frozen=True)
class MCTSConfig:
    """PUCT search as in AlphaZero, with lc0-style first-play urgency and KataGo's playout caps."""

    simulations: int = 32  # simulations of a full search (recorded as a policy target)
    fast_simulations: int = 8  # simulations of a fast search (playout-cap randomisation; not recorded)
    full_search_prob: float = 1.0  # share of moves searched fully; 1.0 turns playout caps off
    c_init: float = 1.25  # AlphaZero exploration: c(N) = c_init + log((1 + N + c_base) / c_base)
    c_base: float = 19652.0
    fpu_reduction: float = 0.25  # unvisited child value = parent Q - fpu_reduction * sqrt(visited prior mass)
    fpu_reduction_root: float = 0.0  # the same at the root (0: unvisited root children get the parent Q)
    policy_temperature: float = 1.0  # priors = softmax(logits / T) over the legal moves (lc0's policy softmax
                                     # temperature); > 1 spreads the search over moves the network ranks low
    dirichlet_alpha: float = 0.3  # root noise concentration (AlphaZero chess: 0.3)
    dirichlet_epsilon: float = 0.25  # root noise weight; 0 disables noise
    tree_reuse: bool = True  # keep the chosen child's subtree for the next move
    mate_in_one: bool = False  # a node whose side to move can mate in one is a proven win (no network call), and a
                               # root (Gumbel or PUCT) plays such a mate: the search sees a mate one move past each leaf
    leaf_capture_value: float = 0.0  # a leaf's value gains this much logit (atanh) per pawn that its side to move can
                                     # win at once by one capture (game.attacks.capture_gain, a static estimate from
                                     # the rules); 0 is AlphaZero: the network's value alone. Arm 4x64-capture
                                     # (0.5) rated below the base at 1 CPU-hour (docs/evaluation-log.md)
    algorithm: Algorithm = "puct"  # puct (AlphaZero) or gumbel: Gumbel noise, sequential halving and the improved policy
                             # target at the root (search/gumbel.py); learns with few simulations
    gumbel_considered: int = 16  # gumbel: moves considered at the root (m; the top m by noise + prior logits)
    gumbel_c_visit: float = 50.0  # gumbel: sigma(q) = (c_visit + max visits) * c_scale * q, q rescaled to [0, 1]
    gumbel_c_scale: float = 1.0
    gumbel_interior: Interior = "puct"  # gumbel: below the root, puct or deterministic (mctx: the move whose visit share
                                   # lags its improved policy most)
    gumbel_root_value: RootValue = "visits"  # gumbel: the root's value (value targets, resignation): visits, the mean of
                                             # every visit's value; improved, the improved policy's expected completed q
    lazy_rows: int = 0  # evaluated nodes whose network logits (18.7 KB each) wait for the node's next visit before
                        # they become edges (most leaves are never visited again); 0: at once. Pays off with Gumbel's
                        # root (configs/learn.yaml: 4096), not with PUCT since moves are compiled (docs/performance.md)
    precision: Precision = "auto"  # the network's arithmetic in search: auto (bf16 on CUDA, float32 on CPU), bf16 (also on
                             # CPU: 1.2-2.5x the evaluations/s where the CPU has avx512_bf16 or AMX, 0.16x where torch
                             # emulates it), bf16-if-native (bf16 where the CPU or GPU has it, else float32:
                             # net/precision.py), float32, int8 (CPU only: the network quantized after training,
                             # net/quantize.py; its speed against bf16 in docs/performance.md)
    channels_last: bool = True  # on CPU, the network's weights and batches in channels-last layout (NHWC): the same
                                # outputs; learn.yaml's bf16 search 1.20x the simulations/s, float32 unchanged
                                # (docs/performance.md)
    move_generator: MoveGenerator = "compiled"  # the search's positions: compiled (game/_movegen.c) or python-chess (the
                                      # reference: the same games, slower; for checks and A/B benchmarks)

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(self.simulations >= 1, "mcts.simulations", "must be >= 1")
        _check(0 <= self.lazy_rows <= 200_000, "mcts.lazy_rows", "must be in 0..200000 (18.7 KB a row)")
        _check(1 <= self.fast_simulations <= self.simulations, "mcts.fast_simulations", "must be in 1..simulations")
        _check(0.0 < self.full_search_prob <= 1.0, "mcts.full_search_prob", "must be in (0, 1]")
        _check(self.c_init > 0 and self.c_base > 0, "mcts.c_init", "c_init and c_base must be > 0")
        _check(self.fpu_reduction >= 0 and self.fpu_reduction_root >= 0, "mcts.fpu_reduction", "must be >= 0")
        low, high = POLICY_TEMPERATURES
        _check(low <= self.policy_temperature <= high, "mcts.policy_temperature",
               f"must be in {low:g}..{high:g} (1: the network's own priors)")
        _check(self.dirichlet_alpha > 0, "mcts.dirichlet_alpha", "must be > 0")
        _check(0.0 <= self.dirichlet_epsilon <= 1.0, "mcts.dirichlet_epsilon", "must be in [0, 1]")
        _check(0.0 <= self.leaf_capture_value <= 4.0, "mcts.leaf_capture_value", "must be in [0, 4] (logit per pawn)")
        _check(2 <= self.gumbel_considered <= 256, "mcts.gumbel_considered", "must be in 2..256")
        _check(self.gumbel_c_visit >= 0 and self.gumbel_c_scale > 0, "mcts.gumbel_c_visit",
               "gumbel_c_visit must be >= 0 and gumbel_c_scale > 0")
        _check(self.gumbel_root_value == "visits" or self.algorithm == "gumbel", "mcts.gumbel_root_value",
               "improved needs mcts.algorithm=gumbel (PUCT has no improved policy)")


@dataclass(frozen=True)
class SelfPlayConfig:
    """How a generation's games are played, split across tasks and stored."""

    games_per_generation: int = 32  # games of one generation, over all self-play tasks
    games_per_shard: int = 8  # games in one HDF5 shard (the unit of resume)
    games_in_flight: int = 16  # games one search process plays at once (each of search_workers, or the task itself);
                               # their leaves form the network batches
    pipeline: bool = False  # two halves of the games take turns, one half's network call overlapping the other's
                            # search. In one process (search_workers 0) it pays off only with the network on a
                            # GPU; in search workers it also helps on CPU cores when one worker shares them with
                            # the network (docs/performance.md)
    max_plies: int = 200  # a game that reaches this many plies is adjudicated a draw
    adjudicate_material: int = 0  # > 0: a game drawn by max_plies, repetition or no progress while a side is at least
                                  # this much material ahead (pawn 1, knight and bishop 3, rook 5, queen 9) counts as
                                  # that side's win. 0: draws stay draws (AlphaZero). Gives small runs, whose games
                                  # mostly end in such draws, a value target (docs/evaluation-log.md,
                                  # "What was wrong, and what fixed it")
    adjudicate_rule_draws: bool = True  # with adjudicate_material: draws by repetition and no progress are scored on
                                        # material too. False: only a game cut at max_plies is; a side ahead that
                                        # repeats or stalls gets a draw
    adjudicated_win_share: float = 1.0  # value target of a game won on material: a win with this probability, else
                                        # a draw (drawn once per game; its PGN and counts keep the win). Below 1 a
                                        # mate is worth more than being ahead when the game is cut, so the net
                                        # learns to convert won positions (docs/evaluation-log.md)
    temperature: float = 1.0  # move sampling temperature over visit counts for the first plies
    temperature_plies: int = 30  # plies played with `temperature`; after that `final_temperature`
    final_temperature: float = 0.0  # 0 plays the most visited move
    resign_threshold: float = -0.9  # resign when the root value stays below this; -1 disables resigning
    resign_consecutive: int = 2  # own moves in a row below the threshold before resigning
    resign_playthrough: float = 0.1  # share of games that never resign, to measure false positives
    repetitions_for_draw: Repetitions = 3  # occurrences of a position that end the game (3: threefold)
    no_progress_plies: int = 100  # plies without capture or pawn move that end the game (100: 50-move rule)
    pgn_games_per_shard: int = 1  # games of each shard also saved as PGN for people to read
    shard_compression: Compression = "gzip"  # HDF5 filter for shard datasets: gzip, lzf or none
    search_workers: int = -1  # search processes sharing one network server per task (docs/performance.md);
                              # 0: one process searches and evaluates; -1 (auto): the CPUs SLURM gave the task
                              # (SLURM_CPUS_PER_TASK) minus one, and 0 outside a SLURM job
    server_max_batch: int = 0  # most leaves in one network batch of the server; 0: all workers' leaves
    server_max_wait_ms: float = 0.0  # hold a partial batch this long for the other workers; 0: run what waits
    search_worker_restarts: int = 2  # search workers that died (killed, OOM) are restarted this many times per task

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(self.games_per_generation >= 1, "selfplay.games_per_generation", "must be >= 1")
        _check(self.games_per_shard >= 1, "selfplay.games_per_shard", "must be >= 1")
        _check(self.games_in_flight >= 1, "selfplay.games_in_flight", "must be >= 1")
        _check(self.max_plies >= 2, "selfplay.max_plies", "must be >= 2")
        _check(self.adjudicate_material >= 0, "selfplay.adjudicate_material", "must be >= 0 (0: max_plies is a draw)")
        _check(0.0 <= self.adjudicated_win_share <= 1.0, "selfplay.adjudicated_win_share", "must be in [0, 1]")
        for key in ("temperature", "final_temperature"):  # below 0.05, visits ** (1 / t) overflows to inf
            t = getattr(self, key)
            _check(t == 0 or 0.05 <= t <= 100, f"selfplay.{key}", "must be 0 (the most visited move) or in 0.05..100")
        _check(self.temperature_plies >= 0, "selfplay.temperature_plies", "must be >= 0")
        _check(-1.0 <= self.resign_threshold <= 1.0, "selfplay.resign_threshold", "must be in [-1, 1]")
        _check(self.resign_consecutive >= 1, "selfplay.resign_consecutive", "must be >= 1")
        _check(0.0 <= self.resign_playthrough <= 1.0, "selfplay.resign_playthrough", "must be in [0, 1]")
        _check(self.no_progress_plies in range(2, 256), "selfplay.no_progress_plies", "must be in 2..255")
        _check(self.pgn_games_per_shard >= 0, "selfplay.pgn_games_per_shard", "must be >= 0")
        _check(self.search_workers >= -1, "selfplay.search_workers", "must be >= 0, or -1 for auto")
        _check(self.server_max_batch == 0 or self.server_max_batch >= self.games_in_flight, "selfplay.server_max_batch",
               "must be 0 (no limit) or >= selfplay.games_in_flight (one worker's leaves)")
        _check(self.server_max_wait_ms >= 0, "selfplay.server_max_wait_ms", "must be >= 0")
        _check(self.search_worker_restarts >= 0, "selfplay.search_worker_restarts", "must be >= 0")


@dataclass(frozen=True)
class TrainConfig:
    """Training on the replay window of recent shards (see the trainer)."""

    batch_size: int = 64  # global batch, split across ranks
    lr: float = 0.02  # learning rate per 256 samples, scaled linearly with the global batch (lr * batch_size / 256)
    lr_decay: float = 1.0  # generation G trains at lr * lr_decay**G (1: constant; pretraining has its own schedule)
    momentum: float = 0.9
    weight_decay: float = 1e-4
    window_generations: int = 4  # train on the shards of this many most recent generations ...
    window_positions: int = 0  # ... and, if > 0, only the newest shards holding up to this many positions
    replay_ratio: float = 4.0  # positions trained per new position of the generation
    checkpoint_every: int = 50  # steps between resumable training states
    amp: Amp = "auto"  # mixed precision: auto (bf16 on CUDA, off on CPU), bf16, bf16-if-native (bf16 where the CPU or
                       # GPU has it, else off: emulated bf16 trained at 0.08x), fp16 (with a grad scaler), off
    compile: bool = False  # torch.compile the network
    channels_last: bool = False  # NHWC memory layout (helps tensor cores)
    loader_workers: int = 2  # DataLoader worker processes per rank
    min_selfplay_fraction: float = 0.75  # training starts only if this share of the generation's games is in
                                         # complete shards (the rest: failed tasks, see docs/pipeline.md)
    keep_states: bool = False  # keep train/gen-N/state.pt (weights + optimizer, for resuming) once models/gen-N.pt is
                               # written; by default it is deleted then, as nothing reads it again
    value_target_q_ratio: float = 0.0  # value target = (1 - r) * game result + r * the search's root value
                                       # (lc0's q_ratio), as a win/draw/loss distribution; 0: the result alone
    value_target_horizon: int = 0  # > 0: that root value is taken this many plies later in the same game (the first
                                   # recorded position that far on; the result past the last); 0: the position's own
    material_horizon: int = 4  # model.material_head's target: the material balance this many plies on (the first
                               # recorded position that far on; the game's last one past its end) less the row's own
    material_weight: float = 1.0  # weight of that head's loss (Huber, in units of 3 pawns) in the training loss

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(self.batch_size >= 1, "train.batch_size", "must be >= 1")
        _check(self.lr > 0, "train.lr", "must be > 0")
        _check(0 < self.lr_decay <= 1, "train.lr_decay", "must be in (0, 1]")
        _check(0 <= self.momentum < 1, "train.momentum", "must be in [0, 1)")
        _check(self.weight_decay >= 0, "train.weight_decay", "must be >= 0")
        _check(self.window_generations >= 1, "train.window_generations", "must be >= 1")
        _check(self.replay_ratio > 0, "train.replay_ratio", "must be > 0")
        _check(self.checkpoint_every >= 1, "train.checkpoint_every", "must be >= 1")
        _check(self.window_positions >= 0, "train.window_positions", "must be >= 0")
        _check(self.loader_workers >= 0, "train.loader_workers", "must be >= 0")
        _check(0.0 < self.min_selfplay_fraction <= 1.0, "train.min_selfplay_fraction", "must be in (0, 1]")
        _check(0.0 <= self.value_target_q_ratio <= 1.0, "train.value_target_q_ratio", "must be in [0, 1]")
        _check(0 <= self.value_target_horizon <= 1000, "train.value_target_horizon", "must be in [0, 1000] plies")
        _check(self.value_target_horizon == 0 or self.value_target_q_ratio > 0, "train.value_target_horizon",
               "needs train.value_target_q_ratio > 0 (the share of the target that the later value is)")
        _check(1 <= self.material_horizon <= 1000, "train.material_horizon", "must be in [1, 1000] plies")
        _check(0 <= self.material_weight <= 100, "train.material_weight", "must be in [0, 100]")


@dataclass(frozen=True)
class SlurmConfig:
    """Resources asked of SLURM for each stage (``azhpc launch`` options set the same keys)."""

    nodes: int = 1  # nodes of a training job; with gpus_per_node also the size of a self-play array
    gpus_per_node: int = 1  # GPUs per node: one self-play task each, all of them in a training job
    selfplay_tasks: int = 0  # self-play array tasks per generation; 0: nodes * gpus_per_node (one per GPU)
    cpus_per_task: int = 2  # CPUs of one self-play task (one GPU each); a training node gets this per GPU
    selfplay_time_min: int = 60  # time limit of a self-play array task, minutes
    train_time_min: int = 60  # time limit of a training job, minutes
    stop_margin_s: int = 120  # stop this long before a job's time limit (save, requeue); see preempt.py
    signal_lead_s: int = 0  # SLURM sends USR2 this long before a job's time limit (a backstop behind the stages' own
                            # stop at stop_margin_s; the stage saves and requeues on it); 0: max(10, stop_margin_s // 2)
    max_attempts: int = 3  # a task or training job gives up after this many attempts in a row without progress
                           # (a new complete shard, a later saved step), and azhpc resume after this many failures
    max_slices: int = 1000  # a backstop: a job stopped at its time limit (SLURM's USR2) is requeued at most this many
                            # times (submitit's max_num_timeout; its default of 3 failed a training job needing 5)
    max_submit_jobs: int = 0  # job records (array elements count one each) the run may keep queued at once: the chain
                              # is submitted a window of generations at a time and extends itself from its training
                              # jobs (launch/window.py); 0: the site's limit, read from sacctmgr/scontrol
    partition: str = ""  # empty: the cluster's default
    account: str = ""
    qos: str = ""

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(self.cpus_per_task >= 1, "slurm.cpus_per_task", "must be >= 1")
        _check(self.selfplay_time_min >= 1 and self.train_time_min >= 1, "slurm.selfplay_time_min", "must be >= 1")
        _check(self.nodes >= 1, "slurm.nodes", "must be >= 1")
        _check(self.max_submit_jobs >= 0, "slurm.max_submit_jobs", "must be >= 0 (0: the site's limit)")
        _check(self.stop_margin_s >= 0, "slurm.stop_margin_s", "must be >= 0 seconds")
        shortest = min(self.selfplay_time_min, self.train_time_min)
        _check(self.stop_margin_s < 60 * shortest, "slurm.stop_margin_s",
               f"({self.stop_margin_s} s) must be below the shortest time limit ({shortest} min = {60 * shortest} s), "
               "or every job stops before it starts: raise --selfplay-time/--train-time or lower slurm.stop_margin_s")
        _check(0 <= self.signal_lead_s < 60 * shortest, "slurm.signal_lead_s",
               f"must be in [0, {60 * shortest}) seconds (0: half the stop margin; below the shortest time limit)")
        _check(self.max_attempts >= 1, "slurm.max_attempts", "must be >= 1")
        _check(self.max_slices >= 1, "slurm.max_slices", "must be >= 1")
        _check(self.gpus_per_node >= 0, "slurm.gpus_per_node", "must be >= 0 (0: CPU-only nodes)")
        _check(self.selfplay_tasks >= 0, "slurm.selfplay_tasks", "must be >= 0 (0: one per GPU)")
        for key in ("partition", "account", "qos"):
            _check(bool(_SLURM_NAME.match(getattr(self, key))), f"slurm.{key}",
                   "may hold only letters, digits and _ . - , (a SLURM name or a comma list of names)")


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation matches: ``azhpc evaluate`` defaults, and the optional stage of ``azhpc launch``."""

    enabled: bool = False  # azhpc launch evaluates each trained network in a job after its training job
    opponents: str = "previous,random"  # comma list of: previous, gen:K, random, greedy, stockfish[:OPTIONS],
                                        # fairy-stockfish[:OPTIONS] (docs/evaluation.md, "Matches")
    games: int = 20  # games per opponent; each opening is played with both colours
    simulations: int = 0  # simulations per move of the network(s); 0: mcts.simulations
    max_plies: int = 400  # a game still going after this many plies is a draw
    adjudicate_material: int = 0  # > 0: a game drawn by repetition, fifty moves or max_plies while a side is this much
                                  # material ahead (pawn 1 ... queen 9) is scored as its win; 0: chess rules only
    openings: str = "book"  # book (the shipped balanced set) or random:K (K random plies per opening, seeded)
    algorithm: PlayAlgorithm = "same"  # the search a network plays with in matches, ratings and UCI: same (mcts.algorithm,
                                       # the search it learned with), puct or gumbel. A Gumbel-trained net can play
                                       # stronger under PUCT at hundreds of simulations (docs/evaluation-log.md)
    policy_temperature: float = 0.0  # the prior's temperature at play (matches, ratings, UCI); 0: mcts.policy_temperature.
                                     # 3 lifted PUCT 800 by +105 and +142 on the scale (docs/evaluation-log.md)
    tree_reuse: bool = False  # at play (matches, ratings, UCI) keep each game's tree between its moves: a move adds
                              # its simulations to the visits its position's subtree already had (docs/evaluation-log.md)
    scale: bool = False  # also rate each network on the calibrated Stockfish 15.1 UCI_Elo scale (evaluate --scale)
    scale_interval: float = 75.0  # ... until the 95% interval from its own games is at most +- this (Elo)
    scale_max_games: int = 600  # ... or it has played this many games against the scale's rungs
    scale_jobs: int = 1  # ... playing this many blocks at once, each in its own process (evaluate --scale --jobs;
                         # an evaluation job on SLURM has slurm.cpus_per_task cores)
    parallel: int = 64  # games played at once; the network searches all of them in shared batches
    time_min: int = 30  # time limit of an evaluation job, minutes

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(self.games >= 1, "eval.games", "must be >= 1")
        _check(self.simulations >= 0, "eval.simulations", "must be >= 0 (0: mcts.simulations)")
        low, high = POLICY_TEMPERATURES
        _check(self.policy_temperature == 0 or low <= self.policy_temperature <= high, "eval.policy_temperature",
               f"must be 0 (mcts.policy_temperature) or in {low:g}..{high:g}")
        _check(self.max_plies >= 2, "eval.max_plies", "must be >= 2")
        _check(self.adjudicate_material >= 0, "eval.adjudicate_material", "must be >= 0 (0: no adjudication)")
        _check(self.parallel >= 1, "eval.parallel", "must be >= 1")
        _check(self.scale_interval > 0, "eval.scale_interval", "must be > 0 (Elo)")
        _check(self.scale_max_games >= 2, "eval.scale_max_games", "must be >= 2")
        _check(self.scale_jobs >= 1, "eval.scale_jobs", "must be >= 1 (blocks played at once)")
        _check(self.time_min >= 1, "eval.time_min", "must be >= 1")
        _check(self.openings == "book" or bool(re.fullmatch(r"random:([1-9]|[1-3][0-9]|40)", self.openings)),
               "eval.openings", "must be 'book' or 'random:K' with K in 1..40")
        for spec in split_opponents(self.opponents):
            _check(bool(_OPPONENT.fullmatch(spec)), "eval.opponents",
                   f"{spec!r} is not one of previous, gen:K, random, greedy, "
                   "stockfish[:skill=S][,elo=E][,nodes=N|depth=D|movetime=MS|tc=BASE+INC] or fairy-stockfish[:...]")


# The shape of an opponent; an engine's options are checked in full where it is made (evaluate/engines.py).
_ENGINE_OPTION = r"(skill|elo|nodes|depth|movetime)=-?\d+|tc=\d+(\.\d+)?\+\d+(\.\d+)?"
_OPPONENT = re.compile(rf"previous|random|greedy|gen:\d+|(fairy-)?stockfish(:({_ENGINE_OPTION})(,({_ENGINE_OPTION}))*)?")


def split_opponents(text: str) -> list[str]:
    """'previous,random,stockfish:skill=1,nodes=500' -> ['previous', 'random', 'stockfish:skill=1,nodes=500']:
    a part with '=' but no kind continues the Stockfish options before it."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if out and "=" in part and ":" not in part and out[-1].startswith(("stockfish:", "fairy-stockfish:")):
            out[-1] += "," + part
        else:
            out.append(part)
    return out


@dataclass(frozen=True)
class PretrainConfig:
    """Training generation 0 on imported games (``azhpc import-pgn``, then ``azhpc launch --pretrain``)."""

    epochs: float = 1.0  # passes over the imported positions (train.batch_size, train.lr as for any generation)
    max_steps: int = 0  # > 0: at most this many steps
    lr_schedule: LrSchedule = "constant"  # constant: train.lr after the warm-up, as self-play generations; cosine: from
                                   # train.lr down to 1% of it over the planned steps (one long supervised run)

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(math.isfinite(self.epochs) and 0 < self.epochs <= 1000, "pretrain.epochs", "must be in (0, 1000]")
        _check(self.max_steps >= 0, "pretrain.max_steps", "must be >= 0 (0: no limit)")


@dataclass(frozen=True)
class RunConfig:
    """Identity of a run."""

    seed: int = 0  # every random stream of the run derives from this
    generations: int = 2  # generations a launch plays and trains

    def __post_init__(self) -> None:
        _check_choices(self)
        _check(self.seed >= 0, "run.seed", "must be >= 0")
        _check(self.generations >= 1, "run.generations", "must be >= 1")


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    mcts: MCTSConfig = field(default_factory=MCTSConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    @property
    def play_search(self) -> Literal["", "puct", "gumbel"]:
        """eval.algorithm where it differs from mcts.algorithm, else "": what a match's ledger key must name."""
        search = self.eval.algorithm
        return "" if search == "same" or search == self.mcts.algorithm else search

    @property
    def play_simulations(self) -> int:
        """Simulations per move a network of this run plays with: eval.simulations, else mcts.simulations."""
        return self.eval.simulations or self.mcts.simulations

    @property
    def play_temperature(self) -> float:
        """The prior's temperature a network of this run plays with: eval.policy_temperature, else mcts's."""
        return self.eval.policy_temperature or self.mcts.policy_temperature

    def playing(self, algorithm: str | None, policy_temperature: float | None = None,
                tree_reuse: bool | None = None) -> Config:
        """This config with eval.algorithm set to ``algorithm`` (a --search option), eval.policy_temperature to
        ``policy_temperature`` (--policy-temperature) and eval.tree_reuse to ``tree_reuse`` (--tree-reuse); None
        keeps each."""
        ev = self.eval
        if algorithm is not None:
            ev = dataclasses.replace(ev, algorithm=cast(PlayAlgorithm, algorithm))  # __post_init__ checks it
        if policy_temperature is not None:
            ev = dataclasses.replace(ev, policy_temperature=policy_temperature)
        if tree_reuse is not None:
            ev = dataclasses.replace(ev, tree_reuse=tree_reuse)
        return dataclasses.replace(self, eval=ev)

    def play_mcts(self) -> MCTSConfig:
        """The search a network of this run plays with (matches, ratings, UCI): mcts with eval.algorithm's choice
        and eval.policy_temperature."""
        search = self.play_search
        mcts = with_algorithm(self.mcts, search) if search else self.mcts
        return dataclasses.replace(mcts, policy_temperature=self.play_temperature)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def digest(self) -> str:
        """SHA-256 of the canonical JSON form: equal configs have equal digests."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


def with_algorithm(mcts: MCTSConfig, algorithm: Algorithm) -> MCTSConfig:
    """``mcts`` searching with ``algorithm`` instead; a Gumbel-only root value falls back to PUCT's (the mean of the
    visits), which changes no move played."""
    root_value = mcts.gumbel_root_value if algorithm == "gumbel" else "visits"
    return dataclasses.replace(mcts, algorithm=algorithm, gumbel_root_value=root_value)


SECTIONS: dict[str, type] = {f.name: typing.get_type_hints(Config)[f.name] for f in dataclasses.fields(Config)}


def _convert(key: str, value: Any, hint: Any) -> Any:
    """Check ``value`` against the field type ``hint``; ints are accepted for floats and a YAML ``off``/``on`` for a
    choice of that name, nothing else is coerced. A Literal's values are checked by the section
    (``_check_choices``), the type of its values here."""
    if choices := _choices(hint):
        hint = type(choices[0])
        if isinstance(value, bool) and ("off" if value is False else "on") in choices:
            value = "off" if value is False else "on"  # YAML 1.1 reads a bare off/on as a bool
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and not -(2**63) < value < 2**63:
            raise ConfigError(f"config value {key}: {value} does not fit in 64 bits")
    elif hint is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            try:
                value = float(value)
            except OverflowError:  # an int beyond float's range
                value = math.inf
            if not math.isfinite(value):
                raise ConfigError(f"config value {key}: must be a finite number, got {value}")
    elif hint is str:
        ok = isinstance(value, str)
    else:  # pragma: no cover - every field uses one of the types above
        raise TypeError(f"unsupported config type {hint!r} for {key}")
    if not ok:
        raise ConfigError(f"config value {key}: expected {hint.__name__}, got {value!r} ({type(value).__name__})")
    return value


def _unknown(kind: str, key: str, valid: Sequence[str]) -> ConfigError:
    near = difflib.get_close_matches(key.rsplit(".", 1)[-1], valid, n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return ConfigError(f"unknown config {kind} {key!r}{hint}; valid: {', '.join(valid)}")


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Build a Config from nested mappings, checking every key and type."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"config must be a mapping of sections, got {type(data).__name__}")
    sections: dict[str, Any] = {}
    for name, values in data.items():
        if name not in SECTIONS:
            raise _unknown("section", str(name), list(SECTIONS))
        cls = SECTIONS[name]
        hints = typing.get_type_hints(cls)
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise ConfigError(f"config section {name} must be a mapping, got {values!r}")
        kwargs = {}
        for key, value in values.items():
            if key not in hints:
                raise _unknown("key", f"{name}.{key}", [f"{name}.{k}" for k in hints])
            kwargs[key] = _convert(f"{name}.{key}", value, hints[key])
        sections[name] = cls(**kwargs)
    return Config(**sections)


def parse_override(text: str) -> tuple[str, str, Any]:
    """Parse ``section.key=value``; the value is read as YAML (``true``, ``3``, ``0.5``, ``abc``). A key whose
    field is a string keeps the text as it is (``load_config``): ``slurm.account=12345`` is the account 12345."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(f"override '{text}' must look like section.key=value, e.g. mcts.simulations=64")
    path, raw = text.split("=", 1)
    section, key = path.strip().split(".", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return section, key, value


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> Config:
    """Read a YAML config (defaults where absent) and apply ``section.key=value`` overrides."""
    data: dict[str, dict[str, Any]] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} not found: pass one of configs/*.yaml or an existing file")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {p} is not valid YAML: {str(exc).splitlines()[0]}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {p} is not UTF-8 text ({exc.reason} at byte {exc.start}): pass a YAML config") from exc
        except OSError as exc:
            raise ConfigError(f"config file {p} cannot be read ({exc.strerror}): check the path and its permissions") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold a mapping of sections")
        data = {k: dict(v or {}) if isinstance(v, Mapping) else v for k, v in loaded.items()}
    for text in overrides:
        section, key, value = parse_override(text)
        if section not in SECTIONS:
            raise _unknown("section", section, list(SECTIONS))
        sect = data.setdefault(section, {})
        if not isinstance(sect, dict):
            raise ConfigError(f"config section {section} must be a mapping")
        hint = typing.get_type_hints(SECTIONS[section]).get(key)
        if hint is str or isinstance((_choices(hint) or (0,))[0], str):  # not YAML: "no" stays "no", "a #b" stays whole
            value = text.split("=", 1)[1].strip()
        sect[key] = value
    return config_from_dict(data)


def config_diff(a: Config, b: Config) -> list[str]:
    """Keys whose values differ, as ``section.key: a -> b``."""
    out = []
    da, db = a.to_dict(), b.to_dict()
    for section in da:
        for key in da[section]:
            if da[section][key] != db[section][key]:
                out.append(f"{section}.{key}: {da[section][key]!r} -> {db[section][key]!r}")
    return out
