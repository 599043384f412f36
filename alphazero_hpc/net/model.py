"""The residual network. It knows nothing about distribution; the trainer wraps it.

Input  [B, 14 * history + 7 (+ 4 attack planes), 8, 8] float32 planes (see ``encoding``).
Output policy logits [B, 4672] (plane * 64 + square, the 73 planes of a 1x1 convolution flattened) and
value logits [B, 3] over (win, draw, loss) for the side to move. With ``model.material_head``, training also asks
for a third output: [B] the material the side to move gains over the next few plies, in units of 3 pawns.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..config import ModelConfig
from ..game.encoding import MOVE_PLANES, num_planes


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, ratio: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // ratio)
        self.fc2 = nn.Linear(channels // ratio, 2 * channels)  # scale and bias, as lc0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.relu(self.fc1(x.mean(dim=(2, 3))))
        w, b = self.fc2(s).chunk(2, dim=1)
        return x * torch.sigmoid(w)[:, :, None, None] + b[:, :, None, None]


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, se_ratio: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.se = SqueezeExcitation(channels, se_ratio) if se_ratio else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        if self.se is not None:
            y = self.se(y)
        return F.relu(x + y)


class AlphaZeroNet(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        c = cfg.filters
        self.stem = nn.Sequential(nn.Conv2d(num_planes(cfg.history, cfg.attack_sets), c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.tower = nn.Sequential(*[ResidualBlock(c, cfg.se_ratio) for _ in range(cfg.blocks)])
        self.policy = nn.Sequential(
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, MOVE_PLANES, 1)
        )
        self.value_conv = nn.Sequential(nn.Conv2d(c, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.value_fc = nn.Sequential(nn.Linear(32 * 64, cfg.value_hidden), nn.ReLU(), nn.Linear(cfg.value_hidden, 3))
        self.material = nn.Sequential(
            nn.Conv2d(c, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.Flatten(),
            nn.Linear(32 * 64, cfg.value_hidden), nn.ReLU(), nn.Linear(cfg.value_hidden, 1)
        ) if cfg.material_head else None

    def forward(self, planes: torch.Tensor, material: bool = False) -> tuple[torch.Tensor, ...]:
        """(policy, value), or with ``material`` (training, ``model.material_head``) (policy, value, material)."""
        x = self.tower(self.stem(planes))
        policy = self.policy(x).flatten(1)  # [B, 73 * 64]: plane-major, matching encoding.move_index
        value = self.value_fc(self.value_conv(x).flatten(1))  # [B, 3] win/draw/loss logits
        if material:
            if self.material is None:
                raise ValueError("this network has no material head (model.material_head: false)")
            return policy, value, self.material(x).squeeze(1)
        return policy, value


def build_model(cfg: ModelConfig, seed: int | None = None) -> AlphaZeroNet:
    """A freshly initialised network; with ``seed`` the weights are the same on every machine."""
    if seed is None:
        return AlphaZeroNet(cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AlphaZeroNet(cfg)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
