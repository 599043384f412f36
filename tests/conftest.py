import fcntl
import getpass
import json
import importlib.util
import os
import pwd
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import chess
import pytest

from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.evaluate.elo import MatchScore, Rating
from alphazero_hpc.evaluate.engines import find_stockfish

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny.yaml"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Who submits to SLURM in the tests: an ordinary user, as on a real site (tests/run.sh sets the testbed's user, made by
# slurm/testbed/testbed.sh); the harness itself stays root where it runs as root (scontrol requeue, sacctmgr, mounts)
SLURM_USER = os.environ.get("AZHPC_TEST_SLURM_USER") or getpass.getuser()

# The standard perft positions (chessprogramming.org): castling, en passant, promotions, pins, checks.
PERFT_FENS = [
    chess.STARTING_FEN,
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",
    "r2q1rk1/pP1p2pp/Q4n2/bbp1p3/Np6/1B3NBn/pPPP1PPP/R3K2R b KQ - 0 1",
    "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
    "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
]


def folded(*parts: str) -> str:
    """A file of the repository with its whitespace folded to single spaces, for quoting figures that wrap lines."""
    return re.sub(r"\s+", " ", ROOT.joinpath(*parts).read_text())


def load_script(path: Path) -> ModuleType:
    """A script of docs/ (no package module), imported from its file as its users run it."""
    spec = importlib.util.spec_from_file_location(f"script_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ledger_games(network: str, simulations: int) -> dict[str, MatchScore]:
    """A kept network's games at PUCT ``simulations`` (T=3, tree reuse: the recipe's play settings) by opponent."""
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for line in (ROOT / "docs" / "networks" / network / "eval" / "ledger.jsonl").read_text().splitlines():
        e = json.loads(line)
        if (e["simulations"], e.get("search"), e.get("policy_temperature"), e.get("tree_reuse")) == \
                (simulations, "puct", 3.0, True):
            t = total[e["opponent"]]
            t[0], t[1], t[2] = t[0] + e["wins"], t[1] + e["draws"], t[2] + e["losses"]
    return {opponent: MatchScore(*wdl) for opponent, wdl in total.items()}


def random_game_boards(n_games: int, seed: int = 0, max_plies: int = 120) -> list[chess.Board]:
    """Every position (with its move stack) of ``n_games`` random games."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_games):
        b = chess.Board()
        while not b.is_game_over() and b.ply() < max_plies:
            out.append(b.copy())
            b.push(rng.choice(list(b.legal_moves)))
        out.append(b.copy())
    return out


def rated(rating: Rating) -> tuple[float, float, float]:
    """A fitted rating's (elo, low, high), asserting that a chain of matches connects it to the anchor (fit_ratings
    gives None for all three otherwise)."""
    assert rating.elo is not None and rating.low is not None and rating.high is not None, rating
    return rating.elo, rating.low, rating.high


def as_user(cmd: list[str], env: dict, user: str | None) -> tuple[list[str], dict]:
    """``cmd`` and ``env`` to run as ``user`` (runuser, with that user's HOME); unchanged for the current user."""
    if not user or user == getpass.getuser():
        return cmd, env
    home = pwd.getpwnam(user).pw_dir
    return ["runuser", "-u", user, "--", *cmd], {**env, "HOME": home, "USER": user, "LOGNAME": user}


def run_cli(*args: str, env: dict | None = None, timeout: float = 300, cwd: Path = ROOT,
            user: str | None = None) -> subprocess.CompletedProcess:
    """``azhpc ARGS`` in a fresh process; ``user``: run by that user (``SLURM_USER`` for what submits to SLURM)."""
    azhpc = shutil.which("azhpc", path=str(Path(sys.executable).parent)) or "azhpc"
    cmd, full_env = as_user([azhpc, *args], {**os.environ, **(env or {})}, user)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=full_env)


def torchrun_leftovers(tmp: Path) -> list[str]:
    """What torchrun left in ``tmp`` (a run's TMPDIR): its log folders (an /tmp/torchelastic_* per start without one
    of ours) or our temporary ones; torchinductor_* is a cache, kept on purpose."""
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(("torchelastic_", "azhpc")))


def slurm_cli(*args: str, **kw) -> subprocess.CompletedProcess:
    """``run_cli`` as the user who submits to SLURM."""
    return run_cli(*args, user=SLURM_USER, **kw)


@pytest.fixture
def tiny_args():
    """Options for a very small self-play task on the tiny config."""
    return ["--config", str(TINY), "--set", "selfplay.games_per_generation=4", "--set", "selfplay.games_per_shard=2",
            "--set", "selfplay.max_plies=24", "--set", "mcts.simulations=8", "--set", "mcts.fast_simulations=2"]


def need_root(reason: str) -> None:
    """Tests that mount file systems need root; outside CI they skip with the reason, in CI they fail."""
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail(f"CI must run as root: {reason}")
        pytest.skip(f"needs root: {reason}")


def slurm_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20).stdout.strip() != ""
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the group marks to schedule the tests
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (tests/run.sh runs two workers), every test that uses the SLURM testbed goes to one worker,
    one after another and first: they share the cluster, its two nodes and the submitting user's limits (one test sets
    MaxSubmitJobs). The other worker runs the tests that need this machine alone, and so does this one once the SLURM
    tests are done (their jobs use this machine's cores as well: a three-worker run of the suite kept both cores ~98% busy)."""
    def uses_slurm(item) -> bool:
        return "slurm_cluster" in getattr(item, "fixturenames", ())

    for item in filter(uses_slurm, items):
        item.add_marker(pytest.mark.xdist_group("slurm"))
    items.sort(key=lambda item: not uses_slurm(item))  # stable: each part keeps its order


# Under pytest-xdist, each worker's busy seconds (every test's setup, call and teardown): the suite's time is the
# busier worker's, and this names it (the SLURM tests' serial path or the tests on this machine alone) in every run
WORKER_SECONDS: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))


def pytest_runtest_logreport(report):
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)  # set by xdist's controller
    if worker:
        part = "SLURM" if report.nodeid.endswith("@slurm") else "local"
        WORKER_SECONDS[worker][part] += report.duration
        WORKER_SECONDS[worker]["tests"] += report.when == "call"


SESSION_START = time.time()


def slurm_cpu_by_run(since: float) -> dict[str, float]:
    """CPU seconds SLURM's accounting gave the jobs that started since ``since`` (every job and array element, its
    steps summed), by the run folder in the job's name (``azhpc-RUN-sp0``; other names as they are). A SLURM test's
    jobs run on this machine's cores beside the other worker's tests, so their CPU is part of the suite's work that
    no test's duration shows. Empty without sacct or accounting."""
    if shutil.which("sacct") is None:
        return {}
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
    try:
        out = subprocess.run(["sacct", "-a", "-n", "-P", "-S", start, "-o", "JobID,JobName,Start,TotalCPU"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    cpu: dict[str, float] = defaultdict(float)
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        parts = line.split("|")
        if len(parts) != 4 or "." in parts[0] or parts[2] in ("", "None", "Unknown") or parts[2] < start:
            continue  # a step (its CPU is in its job's line), or a job that never started or started before
        days, _, clock = parts[3].rpartition("-")
        fields = [float(x) for x in clock.split(":")]
        seconds = sum(f * 60 ** i for i, f in enumerate(reversed(fields))) + 86400 * float(days or 0)
        cpu[re.sub(r"^azhpc-(.+)-(sp|tr|ev|im|pre)\d*$", r"\1", parts[1])] += seconds
    return dict(cpu)


@pytest.hookimpl(trylast=True)  # after --durations' list, next to the suite's time
def pytest_terminal_summary(terminalreporter):
    if WORKER_SECONDS:
        terminalreporter.write_line("busy time per worker: " + "; ".join(
            f"{w} {int(t['tests'])} tests, {t['SLURM'] + t['local']:.0f} s ({t['SLURM']:.0f} s SLURM tests)"
            for w, t in sorted(WORKER_SECONDS.items())))
    if any(t["SLURM"] for t in WORKER_SECONDS.values()):
        try:
            cpu = slurm_cpu_by_run(SESSION_START)
        except (ValueError, IndexError):  # an accounting line in a form not foreseen: no report rather than an error
            cpu = {}
        if cpu:
            top = sorted(cpu.items(), key=lambda kv: -kv[1])
            terminalreporter.write_line(f"CPU of the SLURM tests' jobs (sacct): {sum(cpu.values()):.0f} s; by run: "
                                        + ", ".join(f"{name} {sec:.0f} s" for name, sec in top[:8]))


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real SLURM cluster (slurm/testbed/testbed.sh): tests fail without one in CI and skip elsewhere."""
    if not slurm_answers():
        msg = "no SLURM cluster answers (start one: sudo slurm/testbed/testbed.sh start)"
        if IN_CI or os.environ.get("AZHPC_REQUIRE_SLURM") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %G"], capture_output=True, text=True).stdout
    return nodes


def user_jobs() -> list[str]:
    """``job_id name state`` of every record the submitting user has in the queue (array tasks one by one)."""
    out = subprocess.run(["squeue", "-h", "-r", "-u", SLURM_USER, "-o", "%i %j %T"], capture_output=True, text=True)
    return out.stdout.split("\n")[:-1] if out.returncode == 0 else []


def cluster_report() -> str:
    """What a SLURM test that waited in vain should show besides its own figures: the nodes' states and why."""
    if shutil.which("sinfo") is None:
        return ""
    try:
        out = subprocess.run(["sinfo", "-N", "-o", "%N %T %E"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "\nSLURM nodes: sinfo did not answer within 30 s"
    return "\nSLURM nodes:\n" + (out.stdout or out.stderr)


def nodes_back_in_service(test: str) -> None:
    """A testbed node that an earlier test's job left drained or down (SLURM drains a node whose killed step outlives
    UnkillableStepTimeout, which a loaded 2-core host can reach; a slurmd that missed SlurmdTimeout is marked down)
    would keep every two-node job of the tests after it pending for their whole timeout. ``testbed.sh resume`` (what
    its ``start`` does for the nodes) restarts a dead slurmd, resumes the node and waits for both, sets a partition
    left down up, and removes submit limits and accounts left in the testbed's accounting (a run killed inside the
    MaxSubmitJobs test left the limit, and every launch of the next run refused); the warning names
    the node and SLURM's reason, so the cause stays in the report; a node that does not come back fails the test with
    the script's line. Only as root on the testbed (the script refuses a slurm.conf it did not write); elsewhere
    nothing is touched."""
    if _NODES_LOST:
        pytest.fail(_NODES_LOST[0])
    if os.geteuid() != 0:
        return
    res = subprocess.run(["bash", str(ROOT / "slurm" / "testbed" / "testbed.sh"), "resume"], capture_output=True,
                         text=True, timeout=150)
    if "is not the testbed's" in res.stderr:
        return
    if "resuming" in res.stderr:
        warnings.warn(f"before {test}: testbed node(s) not in service, resumed: {res.stderr.strip()}", stacklevel=2)
    elif res.stderr.strip():  # submit limits, an account or a partition down that an earlier test (or a killed run) left
        warnings.warn(f"before {test}: {res.stderr.strip()}", stacklevel=2)
    if res.returncode != 0:  # every later SLURM test fails at once with this line instead of waiting 90 s again
        _NODES_LOST.append(f"testbed node(s) still cannot take jobs (since {test}): {res.stderr.strip()} "
                           f"(restart: slurm/testbed/testbed.sh start)")
        pytest.fail(_NODES_LOST[0])


_NODES_LOST: list[str] = []  # set once a node did not come back: see nodes_back_in_service


def cancel_left_jobs(test: str) -> None:
    """Cancel what ``test`` left in the submitting user's queue, wait until it is gone, and name it in a warning."""
    left = user_jobs() if slurm_answers() else []
    if left:
        subprocess.run(["scancel", "-u", SLURM_USER], capture_output=True)
        deadline = time.time() + 210  # a step that will not die stays COMPLETING for KillWait + UnkillableStepTimeout
        while user_jobs() and time.time() < deadline:
            time.sleep(1)
        warnings.warn(f"{test} left {len(left)} job record(s), cancelled: {'; '.join(left)}", stacklevel=2)


@pytest.fixture(autouse=True)
def slurm_left_idle(request):
    """Every test that uses the testbed has it to itself: it holds a lock that the other pytest-xdist worker's
    testbed tests wait for (the xdist group above sends them all to one worker, but pytest 9.2 broke that grouping
    silently and two of them shared the cluster), it starts with both nodes in service (``nodes_back_in_service``),
    and after it the submitting user's queue is empty again: what it left (an evaluation still finishing, a job that
    could no longer run) is cancelled, waited for and named in a warning, so the next test (one sets MaxSubmitJobs and
    counts the user's records) starts on an idle cluster."""
    if "slurm_cluster" not in request.fixturenames:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "azhpc-test-slurm.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if slurm_answers():
            nodes_back_in_service(request.node.name)
        yield
        cancel_left_jobs(request.node.name)


@pytest.fixture
def slurm_tmp(slurm_cluster, request):
    """A fresh folder owned by ``SLURM_USER`` for runs submitted to SLURM (pytest's tmp_path sits in a folder only
    its owner can enter); removed after the test, once what the test left queued is cancelled (a job that started
    in a removed folder would fail on the node)."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    folder = Path(tempfile.mkdtemp(prefix=f"azhpc-test-{name}-", dir=os.environ.get("AZHPC_TEST_SLURM_DIR")))
    pw = pwd.getpwnam(SLURM_USER)
    os.chown(folder, pw.pw_uid, pw.pw_gid)
    yield folder
    cancel_left_jobs(request.node.name)
    if os.environ.get("AZHPC_TEST_KEEP") != "1":  # AZHPC_TEST_KEEP=1: left for a look after a failure
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def stockfish():
    """The Stockfish binary: a test that needs it fails in CI (tests/run.sh installs it) and skips elsewhere."""
    try:
        return find_stockfish()
    except AzhpcError as exc:
        if IN_CI or os.environ.get("AZHPC_REQUIRE_STOCKFISH") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture
def engines(stockfish):
    """Stockfish and Fairy-Stockfish (the scale's engine rungs): as ``stockfish``, a test fails in CI without them."""
    from alphazero_hpc.evaluate.engines import find_engine

    try:
        return {"stockfish": stockfish, "fairy-stockfish": find_engine("fairy-stockfish")}
    except AzhpcError as exc:
        if IN_CI or os.environ.get("AZHPC_REQUIRE_STOCKFISH") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session", autouse=True)
def cpu_hog():
    """``AZHPC_TEST_LOAD=1``: one process keeps a core busy for the whole run (a loaded machine, as a shared login
    node or a busy CI runner is), so anyone can check that no verdict depends on the host being quiet. ``N`` > 1
    starts N hogs. The hog runs at normal priority and is killed when the session ends."""
    count = int(os.environ.get("AZHPC_TEST_LOAD", "0") or 0)
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":  # one set of hogs per run, not one per worker
        count = 0
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
            for _ in range(max(0, count))]
    yield hogs
    for hog in hogs:
        hog.kill()
        hog.wait()
