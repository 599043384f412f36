"""``azhpc status``: what a run is doing, from its folder (progress files, sidecars, metrics, checkpoints)
and, when present, from squeue and sacct. Every task's progress shows while it runs.

A task's state: ``done`` when its progress file says so; else what the scheduler says of its array element
(pending, running, failed with SLURM's state); else the progress file (running, failed with its error);
else pending. A local run reads its stage processes from launch.json instead of a scheduler.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from . import scheduler
from .launch.plan import LaunchPlan
from .launch.record import LaunchRecord, pid_alive, read_record
from .launch.stages import generation_games
from .errors import AzhpcError
from .paths import RunPaths
from .progress import read_progress
from .run import read_run_config


def _metrics(paths: RunPaths, generation: int) -> dict[str, Any]:
    path = paths.train_dir(generation + 1) / "metrics.jsonl"
    last = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                last = json.loads(line)
            except json.JSONDecodeError:
                pass  # a line being written
    return last


def _task_state(t: int, progress: dict | None, record: LaunchRecord | None, states: dict, generation: int) -> tuple[str, str]:
    """(state, detail) of one self-play task."""
    if progress and progress.get("status") == "done":
        return "done", ""
    sched = None
    if record is not None:
        jobs = [j for j in record.jobs_of(generation, "selfplay") if t in j.task_ids()]
        if jobs:
            job = jobs[-1]
            if record.plan.cluster == "local":
                if job.state == "running" and pid_alive(job.local_pid):
                    return "running", ""
                if job.state == "failed" or job.state == "running":
                    return "failed", (progress or {}).get("error") or f"process exited with status {job.exit_code}"
                return ("done", "") if job.state == "done" else ("pending", "")
            sched = scheduler.element_state(states, job.job_id, job.element(t), job.size)
    if sched is not None:
        if sched.state == "PENDING" or sched.state.startswith("REQUEUE"):
            return "pending", sched.reason
        if sched.active:
            return "running", ""
        if sched.failed:
            if progress is None:
                return "failed", f"{sched.state} before it started"
            return "failed", f"{sched.state} ({sched.reason})" + (f": {progress['error']}" if progress.get("error") else "")
        if progress is None:
            return "failed", f"{sched.state} without writing progress"
    if progress is None:
        return "pending", ""
    if progress.get("status") == "failed":
        return "failed", progress.get("error", "")
    if progress.get("status") == "stopped":  # and no job of it is coming: resume continues it
        return "failed", f"{progress.get('error') or 'stopped'}; azhpc resume continues it"
    return "running", ""


def collect(run_dir: Path) -> dict[str, Any]:
    paths = RunPaths(Path(run_dir))
    cfg = read_run_config(paths)
    record = read_record(paths)
    if record is not None:
        plan = record.plan
    else:  # a run made by hand with azhpc selfplay/train
        gens = paths.generations()
        found = [read_progress(p) for g in gens for p in paths.selfplay(g).glob("progress/*.json")]
        tasks = max([p.get("num_tasks", 1) for p in found if p] or [1])
        plan = LaunchPlan("manual", max(gens, default=-1) + 1, tasks, 1, 0, 1)
    states = scheduler.query([j.job_id for j in record.jobs]) if record and plan.cluster == "slurm" else {}
    out: dict[str, Any] = {"run": str(paths.root), "time": time.time(), "plan": plan.to_json(),
                           "config_sha256": cfg.digest(), "generations": []}
    if record is not None and record.supervisor:
        sup = dict(record.supervisor)
        if sup.get("state") == "running" and not pid_alive(int(sup.get("pid", 0) or 0)):
            sup["state"] = "lost"
            sup["error"] = "the local supervisor is gone (killed?); its stage processes may have been stopped with it"
        out["supervisor"] = sup
    ledger = _ledger(paths)
    for g in range(plan.generations):
        out["generations"].append(_generation(paths, cfg, plan, record, states, g, ledger))
    return out


def _ledger(paths: RunPaths) -> tuple[list[dict[str, Any]], str]:
    """The evaluation ledger's entries (read once per status), or the line saying why it cannot be read."""
    from .evaluate.ledger import read_ledger

    try:
        return read_ledger(paths.ledger), ""
    except AzhpcError as exc:
        return [], str(exc)


def _generation(paths, cfg, plan, record, states, g: int, ledger: tuple[list[dict[str, Any]], str]) -> dict[str, Any]:
    tasks, totals = [], {"games_done": 0, "plies": 0, "games_in_shards": 0, "white_wins": 0, "draws": 0, "black_wins": 0,
                          "playthrough_games": 0, "would_resign": 0, "resign_false_positives": 0, "games_per_s": 0.0}
    counts = {"done": 0, "running": 0, "pending": 0, "failed": 0}
    for t in range(plan.tasks):
        p = read_progress(paths.progress(g, t))
        state, detail = _task_state(t, p, record, states, g)
        counts[state] += 1
        row = {"task": t, "state": state, "detail": detail, "attempt": (p or {}).get("attempt", 0),
               "games": (p or {}).get("games_done", 0), "games_target": (p or {}).get("games_target", 0),
               "positions": (p or {}).get("positions", 0), "shards": (p or {}).get("shards_done", 0),
               "games_per_s": (p or {}).get("games_per_s", 0.0), "host": (p or {}).get("host", ""),
               "search_workers": (p or {}).get("search_workers", 0),
               "search_worker_restarts": (p or {}).get("search_worker_restarts", 0)}
        tasks.append(row)
        for k in totals:
            if p and k != "games_per_s":
                totals[k] += p.get(k, 0)
        if p and state == "running":
            totals["games_per_s"] += p.get("games_per_s", 0.0)
    games, positions, shards = generation_games(paths, g)
    sp = {**counts, "tasks": plan.tasks, "games": games, "games_target": cfg.selfplay.games_per_generation,
          "positions": positions, "shards": shards, "games_per_s": totals["games_per_s"],
          "avg_game_plies": totals["plies"] / totals["games_in_shards"] if totals["games_in_shards"] else 0.0,
          "wdl": [totals["white_wins"], totals["draws"], totals["black_wins"]],
          "resign_false_positives": totals["resign_false_positives"], "playthrough_games": totals["playthrough_games"],
          "search_worker_restarts": sum(r["search_worker_restarts"] for r in tasks), "task_rows": tasks}
    m = _metrics(paths, g)
    tp = read_progress(paths.train_progress(g + 1)) or {}
    ckpt = paths.model(g + 1)
    train = {"state": "done" if ckpt.exists() else tp.get("status", "pending"), "step": m.get("step", 0),
             "steps": m.get("steps", 0), "policy_loss": m.get("policy_loss"), "value_loss": m.get("value_loss"),
             "world_size": m.get("world_size", 0), "checkpoint": str(ckpt) if ckpt.exists() else "",
             "attempt": tp.get("attempt", 0), "error": tp.get("error", "")}
    jobs = []
    if record is not None:
        for j in record.jobs:
            if j.generation != g:
                continue
            row = {"stage": j.stage, "job_id": j.job_id, "tasks": j.tasks, "attempt": j.attempt, "dependency": j.dependency}
            if plan.cluster == "slurm":
                found = [states.get(f"{j.job_id}_{i}") for i in range(j.size)] if j.stage == "selfplay" else []
                found = [e for e in found if e] or [e for e in [states.get(j.job_id)] if e]
                row["state"] = "/".join(sorted({e.state for e in found})) or "UNKNOWN (not in squeue/sacct)"
                row["reason"] = ",".join(sorted({e.reason for e in found if e.source == "squeue" and e.reason}))
            else:
                row["state"], row["exit_code"] = j.state, j.exit_code
            jobs.append(row)
        if plan.cluster == "slurm" and train["state"] in ("pending", "starting"):
            tj = [r for r in jobs if r["stage"] == "train"]
            if tj and tj[-1]["state"].startswith("CANCELLED") and train["state"] == "pending":
                train["state"] = "cancelled"
                train["error"] = f"job {tj[-1]['job_id']} cancelled (by scancel, or because a stage it depends on failed)"
            elif tj and tj[-1]["state"].startswith(("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")):
                train["state"] = "failed"
                train["error"] = train["error"] or f"job {tj[-1]['job_id']} {tj[-1]['state']}"
    return {"generation": g, "selfplay": sp, "train": train, "eval": _eval(paths, g + 1, jobs, ledger), "jobs": jobs}


def _eval(paths: RunPaths, network: int, jobs: list[dict], ledger: tuple[list[dict[str, Any]], str]) -> dict[str, Any] | None:
    """Evaluation of the network generation ``network`` (what this generation's training wrote): the stage's
    progress, its job, and every ledger match that network played. None when it was never evaluated."""
    from .evaluate.elo import format_elo
    from .evaluate.runner import eval_progress_path

    all_entries, ledger_error = ledger
    entries = [e for e in all_entries if e["player"] == f"gen:{network}"]
    progress = read_progress(eval_progress_path(paths, network)) or {}
    job = next((j for j in reversed(jobs) if j["stage"] == "eval"), None)
    if not entries and not progress and job is None:
        return None
    state = progress.get("status") or ("pending" if job is not None else "done")
    if job is not None and state in ("pending", "running"):
        js = job["state"].split("/")[0]
        if js.split(" ")[0] in scheduler.FAILED or js == "failed":  # SLURM's failed states, or a local failure
            state = "failed"
    matches = [f"vs {e['opponent']} +{e['wins']}={e['draws']}-{e['losses']} Elo {format_elo(e['elo'], e['score'])} "
               f"[{format_elo(e['elo_low'], 0.0)}, {format_elo(e['elo_high'], 1.0)}]" for e in entries]
    return {"network": network, "state": state, "matches": matches,
            "error": "; ".join(progress.get("errors", [])) or ledger_error}


def render(status: dict[str, Any]) -> str:
    plan = status["plan"]
    lines = [f"run {status['run']}  ({plan['cluster']}: {plan['nodes']} node(s) x {plan['gpus_per_node']} GPU(s), "
             f"{plan['tasks']} self-play tasks/generation, {plan['generations']} generations)"]
    sup = status.get("supervisor")
    if sup:
        lines.append(f"  local supervisor pid {sup.get('pid')} on {sup.get('host')}: {sup.get('state')}"
                     + (f" - {sup['error']}" if sup.get("error") else ""))
    for gen in status["generations"]:
        sp, tr, g = gen["selfplay"], gen["train"], gen["generation"]
        wdl = "/".join(str(x) for x in sp["wdl"])
        rate = f"{sp['games_per_s']:.2f} games/s, " if sp["running"] else ""  # a live rate: none once nothing runs
        lines.append(f"gen {g:>3}  self-play  {sp['done']}/{sp['tasks']} done, {sp['running']} running, {sp['pending']} pending, "
                     f"{sp['failed']} failed | {sp['games']}/{sp['games_target']} games, {sp['positions']} positions, "
                     f"{sp['shards']} shards | {rate}{sp['avg_game_plies']:.1f} plies/game, "
                     f"W/D/L {wdl}, resign false positives {sp['resign_false_positives']}/{sp['playthrough_games']}"
                     + (f", search workers restarted {sp['search_worker_restarts']}x" if sp["search_worker_restarts"] else ""))
        for row in sp["task_rows"]:
            if row["state"] == "running":
                workers = (f", {row['search_workers']} search workers ({row['search_worker_restarts']} restarted)"
                           if row["search_workers"] else "")
                lines.append(f"           task {row['task']:>4}  running on {row['host'] or '?'}: {row['games']}/{row['games_target']} games, "
                             f"{row['positions']} positions, {row['games_per_s']:.2f} games/s{workers} (attempt {row['attempt']})")
            elif row["state"] == "failed":
                lines.append(f"           task {row['task']:>4}  FAILED (attempt {row['attempt']}): {row['detail']}")
        loss = (f", policy loss {tr['policy_loss']:.3f}, value loss {tr['value_loss']:.3f}"
                if tr["policy_loss"] is not None else "")
        lines.append(f"         train      {tr['state']}: step {tr['step']}/{tr['steps'] or '?'}{loss}"
                     + (f", world {tr['world_size']}" if tr["world_size"] else "")
                     + (f" -> {tr['checkpoint']}" if tr["checkpoint"] else "") + (f" - {tr['error']}" if tr["error"] else ""))
        ev = gen.get("eval")
        if ev:
            lines.append(f"         eval       gen:{ev['network']} {ev['state']}" + (": " + "; ".join(ev["matches"]) if ev["matches"] else "")
                         + (f" - {ev['error']}" if ev["error"] else ""))
        if gen["jobs"] and plan["cluster"] == "slurm":
            lines.append("         jobs       " + "; ".join(
                f"{j['stage']} {j['job_id']} {j['state']}" + (f" ({j['reason']})" if j.get("reason") else "") for j in gen["jobs"]))
        elif gen["jobs"]:
            lines.append("         processes  " + _local_jobs(gen["jobs"]))
    return "\n".join(lines)


def render_brief(status: dict[str, Any]) -> str:
    """One line for the generation in progress (what ``azhpc launch --wait`` prints as it changes)."""
    gens = status["generations"]
    if not gens:
        return "nothing planned"
    gen = next((g for g in gens if not g["train"]["checkpoint"]), gens[-1])
    sp, tr = gen["selfplay"], gen["train"]
    failed = f", {sp['failed']} FAILED" if sp["failed"] else ""
    return (f"gen {gen['generation']}/{len(gens) - 1}: self-play {sp['done']}/{sp['tasks']} done, {sp['running']} running, "
            f"{sp['pending']} pending{failed}, {sp['games']}/{sp['games_target']} games, {sp['positions']} positions | "
            f"train {tr['state']} step {tr['step']}/{tr['steps'] or '?'}" + (f" - {tr['error']}" if tr["error"] else ""))


def _local_jobs(jobs: list[dict]) -> str:
    by = {}
    for j in jobs:
        by.setdefault((j["stage"], j["state"]), 0)
        by[(j["stage"], j["state"])] += 1
    return ", ".join(f"{stage} {state} x{n}" for (stage, state), n in sorted(by.items()))


def _active(jobs: list[dict]) -> bool:
    return any(name in scheduler.ACTIVE for j in jobs for name in j["state"].split("/"))


def finished(status: dict[str, Any]) -> tuple[bool, bool]:
    """(over, succeeded): over when nothing can still change; succeeded when the last checkpoint exists."""
    gens = status["generations"]
    sup = status.get("supervisor")
    if gens and gens[-1]["train"]["checkpoint"]:
        if sup is not None:  # a local run: the supervisor ends after the last evaluation
            return sup.get("state") in ("done", "failed", "cancelled", "lost"), True
        evals = [j for g in gens for j in g["jobs"] if j["stage"] == "eval"]
        return not _active(evals), True
    if sup is not None:  # a local run
        return sup.get("state") in ("done", "failed", "cancelled", "lost"), False
    if status["plan"]["cluster"] == "manual":  # no jobs to ask about: over when nothing runs
        return not any(g["selfplay"]["running"] or g["train"]["state"] == "running" for g in gens), False
    for gen in gens:
        if gen["train"]["state"] in ("failed", "cancelled"):
            return not _active([j for g2 in gens[gen["generation"] + 1:] for j in g2["jobs"]]), False
    return not _active([j for gen in gens for j in gen["jobs"]]), False
