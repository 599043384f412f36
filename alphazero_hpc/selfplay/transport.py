"""How a search worker and its task's network server talk (``selfplay.pool``): a *slot* of shared memory per
worker (input planes, policy logits and values for up to ``games_in_flight`` leaves, and the ``SlotCounter``s), an
8-byte request and answer on the worker's evaluation pipe (first row in its slot, rows), and small typed control
messages (``Hello``, ``NextShard``, ``GameDone``, ``ShardDone``, ``WorkerFailed``, ``WorkerExit``; ``Died`` is the
server's own note). No array is ever pickled."""

from __future__ import annotations

import multiprocessing as mp
import struct
from dataclasses import dataclass
from enum import IntEnum
from multiprocessing.connection import Connection
from typing import Any, Callable

import numpy as np

from ..errors import AzhpcError
from ..game.encoding import NUM_MOVES, num_planes
from ..store.shards import Sidecar

REQUEST = struct.Struct("<II")  # a request and its answer: first row in the worker's slot, rows


class SlotCounter(IntEnum):
    """The counters in a worker's slot (float64), written by the worker after every step."""

    SIMULATIONS = 0
    POSITIONS = 1  # positions recorded for training
    WAIT_NETWORK = 2  # seconds waiting for the network's answer
    RULES = 3  # seconds in the chess rules (new nodes: push, legal moves, end of game; compiled or python-chess)
    TREE = 4  # seconds selecting and backing up
    ENCODE = 5  # seconds encoding leaves into planes
    IN_FLIGHT = 6  # games in flight now


TIME_SPLIT = {"network_wait": SlotCounter.WAIT_NETWORK, "rules": SlotCounter.RULES, "tree": SlotCounter.TREE, "encode": SlotCounter.ENCODE}


# Control messages of a worker to the server (the server answers NextShard with a shard number or None).
@dataclass(frozen=True)
class Hello:
    pid: int
    torch_imported: bool  # a search worker must never import torch


@dataclass(frozen=True)
class NextShard:
    pass


@dataclass(frozen=True)
class GameDone:
    shard: int
    simulations: int  # the worker's simulations so far


@dataclass(frozen=True)
class ShardDone:
    sidecar: Sidecar


@dataclass(frozen=True)
class WorkerFailed:
    error: str  # one line
    traceback: str


@dataclass(frozen=True)
class WorkerExit:
    how: str  # done, stopped


@dataclass(frozen=True)
class Died:
    """Not sent by a worker: the server's note that a worker's process ended."""


Message = Hello | NextShard | GameDone | ShardDone | WorkerFailed | WorkerExit | Died


class Slot:
    """A worker's shared memory: ``rows`` leaves of input planes, their logits and values, and counters."""

    def __init__(self, rows: int, history: int, ctx: Any = None, attack_planes: int = 0) -> None:
        self.rows, self.history, self.attack_planes = rows, history, attack_planes
        ctx = ctx or mp.get_context("spawn")
        c = num_planes(history, attack_planes)
        self._raw = (ctx.RawArray("f", rows * c * 64), ctx.RawArray("f", rows * NUM_MOVES),
                     ctx.RawArray("f", rows), ctx.RawArray("d", len(SlotCounter)))
        self._map()

    def _map(self) -> None:
        planes, logits, values, counters = self._raw
        self.planes = np.frombuffer(planes, np.float32).reshape(self.rows, num_planes(self.history, self.attack_planes), 8, 8)
        self.logits = np.frombuffer(logits, np.float32).reshape(self.rows, NUM_MOVES)
        self.values = np.frombuffer(values, np.float32)
        self.counters = np.frombuffer(counters, np.float64)

    def __getstate__(self) -> dict:  # only while spawning a worker: the RawArrays travel as shared memory
        return {"rows": self.rows, "history": self.history, "attack_planes": self.attack_planes, "_raw": self._raw}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._map()


class RemoteEvaluator:
    """The worker's side: write the leaves into the slot, send where they are, wait for the server's answer.

    With the pipeline the engine's two groups of games own the two halves of the slot and each may have a
    request out at once (``submit``): the worker searches one group while the server evaluates the other,
    without a helper thread (whose wake-ups would wait for the GIL). The server answers a worker's requests in
    the order they came.
    """

    def __init__(self, slot: Slot, conn: Connection, widths: tuple[int, int]) -> None:
        self.slot, self.conn, self.history, self.attack_planes = slot, conn, slot.history, slot.attack_planes
        self.offsets = (0, widths[0])

    def submit(self, planes: np.ndarray, part: int = 0) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """Send the leaves of group ``part``; returns the call that waits for their answer."""
        n, offset = len(planes), self.offsets[part]
        self.slot.planes[offset:offset + n] = planes
        request = REQUEST.pack(offset, n)
        self._talk(lambda: self.conn.send_bytes(request))
        return lambda: self._answer(request)

    def _answer(self, request: bytes) -> tuple[np.ndarray, np.ndarray]:
        answer = self._talk(self.conn.recv_bytes)
        if answer != request:  # pragma: no cover - a broken protocol, not a user error
            raise AzhpcError(f"search worker got the answer {REQUEST.unpack(answer)} for {REQUEST.unpack(request)}")
        offset, n = REQUEST.unpack(request)
        # Copies: the group's next request reuses these rows while its values are backed up.
        return self.slot.logits[offset:offset + n].copy(), self.slot.values[offset:offset + n].copy()

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.submit(planes)()

    @staticmethod
    def _talk(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (EOFError, OSError) as exc:
            raise AzhpcError("the self-play task's network server has gone (it failed or was killed)") from exc


def drain(conn: Connection) -> list[Any]:
    out = []
    try:
        while conn.poll():
            out.append(conn.recv())
    except (EOFError, OSError):
        pass  # the worker is gone; its sentinel says so
    return out
