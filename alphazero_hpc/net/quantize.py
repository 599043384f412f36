"""``mcts.precision: int8``: the network quantized for CPU inference (post-training, static).

Weights int8 per output channel, activations uint8 per tensor, every convolution with its batch norm and ReLU fused
(torch's FX graph mode with the ``x86`` backend: fbgemm/oneDNN kernels, VNNI where the CPU has it). The activations'
ranges are measured on positions the quantizer makes itself (``calibration_positions``: seeded games from the start
position to the endgame, a capture preferred 30% of the time, so that material comes off the board as in real
games), on one thread, so every process on one CPU model that quantizes the same network gets the same int8 network
(another CPU's kernels may round differently), and no run's data is needed.
Its outputs are float32, as the search expects; training never sees it (it trains the float32 network).

What it costs in accuracy is measured by ``azhpc bench selfplay --vary mcts.precision=...`` (the speed) and by the
tests (``tests/test_quantize.py``: agreement with float32 on a trained network of docs/networks). It uses
``torch.ao.quantization``'s FX mode, which torch marks deprecated in favour of torchao's pt2e flow (which needs
torch.compile to run fast on a CPU); it is present and works in the pinned torch 2.13."""

from __future__ import annotations

import copy
import random
import warnings

import chess
import numpy as np
import torch
from torch import nn

from ..errors import AzhpcError
from ..game.encoding import encode_boards
from .model import AlphaZeroNet

CALIBRATION_POSITIONS = 128
CALIBRATION_BATCH = 16


def calibration_boards(count: int = CALIBRATION_POSITIONS, seed: int = 0) -> list[chess.Board]:
    """``count`` positions of seeded games, every 8th ply from the 4th of each game up to 200 plies or its end:
    openings, middlegames and endgames, with a capture played 30% of the time one is legal (material comes off as
    in real games)."""
    rng = random.Random(seed)
    boards: list[chess.Board] = []
    while len(boards) < count:
        board = chess.Board()
        for ply in range(200):
            moves = list(board.legal_moves)
            if not moves or board.is_insufficient_material():
                break
            if ply % 8 == 4:
                boards.append(board.copy())
            captures = [m for m in moves if board.is_capture(m)]
            board.push(rng.choice(captures) if captures and rng.random() < 0.3 else rng.choice(moves))
    return boards[:count]


def calibration_positions(history: int, attacks: int, count: int = CALIBRATION_POSITIONS, seed: int = 0) -> np.ndarray:
    """``calibration_boards`` encoded: the planes the int8 network's activation ranges are measured on."""
    return encode_boards(calibration_boards(count, seed), history, attacks)


class _Search(nn.Module):
    """The network's search outputs (policy, value): ``forward(planes)`` alone, which FX traces."""

    def __init__(self, model: AlphaZeroNet) -> None:
        super().__init__()
        self.model = model

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.model(planes, False)


def quantize_int8(model: AlphaZeroNet) -> nn.Module:
    """``model`` (left as it is) quantized to int8 for the CPU, calibrated on ``calibration_positions``: a module
    taking float32 planes [B, C, 8, 8] and returning float32 (policy, value) logits."""
    try:
        with warnings.catch_warnings():  # torch's notice that FX quantization moves to torchao, and observer chatter
            warnings.simplefilter("ignore")
            from torch.ao.quantization import get_default_qconfig_mapping
            from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

            if "x86" not in torch.backends.quantized.supported_engines:
                raise RuntimeError(f"this torch has no x86 quantized engine (it has {torch.backends.quantized.supported_engines})")
            torch.backends.quantized.engine = "x86"
            planes = torch.from_numpy(calibration_positions(model.cfg.history, model.cfg.attack_sets))
            search = _Search(copy.deepcopy(model).float().eval())
            prepared = prepare_fx(search, get_default_qconfig_mapping("x86"), example_inputs=(planes[:CALIBRATION_BATCH],))
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # the ranges from one thread's sums: the same on every node, whatever its cores
            try:
                with torch.inference_mode():
                    for i in range(0, len(planes), CALIBRATION_BATCH):
                        prepared(planes[i:i + CALIBRATION_BATCH])
            finally:
                torch.set_num_threads(threads)
            return convert_fx(prepared).eval()
    except Exception as exc:  # noqa: BLE001 - a trace or kernel this torch lacks: one line, the fix named
        raise AzhpcError(f"mcts.precision int8: this torch cannot quantize the network ({exc}); use bf16-if-native "
                         f"or float32") from exc
