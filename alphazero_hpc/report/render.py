"""``azhpc status`` as text: every generation's stages, tasks, jobs and losses (``render``), and the one line that
``azhpc launch --wait`` prints as the run changes (``render_brief``), from the ``RunStatus`` of ``report.status``."""

from __future__ import annotations

from .status import JobRow, RunStatus, TrainStatus


def render(status: RunStatus) -> str:
    plan = status.plan
    lines = [f"run {status.run}  ({plan.cluster}: {plan.nodes} node(s) x {plan.gpus_per_node} GPU(s), "
             f"{plan.tasks} self-play tasks/generation, {plan.generations} generations)"]
    if status.scheduler_error:
        lines.append(f"  WARNING: {status.scheduler_error}")
    if status.chain:
        lines.append(f"  chain: {status.chain}")
    sup = status.supervisor
    if sup:
        lines.append(f"  local supervisor pid {sup.get('pid')} on {sup.get('host')}: {sup.get('state')}"
                     + (f" - {sup['error']}" if sup.get("error") else ""))
    im = status.imported
    if im:
        left = ", ".join(f"{n} {why}" for why, n in sorted(im.rejected.items())) or "none"
        rate = f", {im.positions_per_s:.0f} positions/s" if im.positions_per_s else ""
        lines.append(f"import   {im.done}/{im.tasks} tasks done | {im.games} games, {im.positions} positions, {im.shards} shards "
                     f"({im.games_read} games of the input read{rate}) | left out: {left}"
                     + (f" | {im.malformed} malformed (games {', '.join(map(str, im.malformed_games[:5]))}"
                        f"{', ...' if im.malformed > 5 else ''})" if im.malformed else ""))
        lines += [f"         {line}" for line in im.failed]
    if status.pretrain:
        lines.append("pretrain " + _train_line(status.pretrain))
    for gen in status.generations:
        sp, tr, g = gen.selfplay, gen.train, gen.generation
        wdl = "/".join(str(x) for x in sp.wdl)
        rate = f"{sp.games_per_s:.2f} games/s, " if sp.running else ""  # a live rate: none once nothing runs
        lines.append(f"gen {g:>3}  self-play  {sp.done}/{sp.tasks} done, {sp.running} running, {sp.pending} pending, "
                     f"{sp.failed} failed | {sp.games}/{sp.games_target} games, {sp.positions} positions, "
                     f"{sp.shards} shards | {rate}{sp.avg_game_plies:.1f} plies/game, "
                     f"W/D/L {wdl}, resign false positives {sp.resign_false_positives}/{sp.playthrough_games}"
                     + (f", search workers restarted {sp.search_worker_restarts}x" if sp.search_worker_restarts else ""))
        for row in sp.task_rows:
            if row.state == "running":
                workers = (f", {row.search_workers} search workers ({row.search_worker_restarts} restarted)"
                           if row.search_workers else "")
                on = f"{row.host or '?'}" + (f", {row.device}" if row.device else "")
                lines.append(f"           task {row.task:>4}  running on {on}: {row.games}/{row.games_target} games, "
                             f"{row.positions} positions, {row.games_per_s:.2f} games/s{workers} (attempt {row.attempt})")
            elif row.state == "failed":
                lines.append(f"           task {row.task:>4}  FAILED (attempt {row.attempt}): {row.detail}")
        lines.append("         train      " + _train_line(tr))
        ev = gen.eval
        if ev:
            lines.append(f"         eval       gen:{ev.network} {ev.state}" + (": " + "; ".join(ev.matches) if ev.matches else "")
                         + (f" - {ev.error}" if ev.error else ""))
        if gen.jobs and plan.cluster == "slurm":
            lines.append("         jobs       " + "; ".join(
                f"{j.stage} {j.job_id} {j.state}" + (f" ({j.reason})" if j.reason else "") for j in gen.jobs))
        elif gen.jobs:
            lines.append("         processes  " + _local_jobs(gen.jobs))
    return "\n".join(lines)


def _train_line(tr: TrainStatus) -> str:
    loss = f", policy loss {tr.policy_loss:.3f}, value loss {tr.value_loss:.3f}" if tr.policy_loss is not None else ""
    return (f"{tr.state}: step {tr.step}/{tr.steps or '?'}{loss}" + (f", world {tr.world_size}" if tr.world_size else "")
            + (f" -> {tr.checkpoint}" if tr.checkpoint else "") + (f" - {tr.error}" if tr.error else ""))


def render_brief(status: RunStatus) -> str:
    """One line for the generation in progress (what ``azhpc launch --wait`` prints as it changes)."""
    gens = status.generations
    if not gens:
        return "nothing planned"
    pre = status.pretrain
    if pre is not None and not pre.checkpoint:
        return f"pretrain {pre.state} step {pre.step}/{pre.steps or '?'}" + (f" - {pre.error}" if pre.error else "")
    gen = next((g for g in gens if not g.train.checkpoint), gens[-1])
    sp, tr = gen.selfplay, gen.train
    failed = f", {sp.failed} FAILED" if sp.failed else ""
    return (f"gen {gen.generation}/{len(gens) - 1}: self-play {sp.done}/{sp.tasks} done, {sp.running} running, "
            f"{sp.pending} pending{failed}, {sp.games}/{sp.games_target} games, {sp.positions} positions | "
            f"train {tr.state} step {tr.step}/{tr.steps or '?'}" + (f" - {tr.error}" if tr.error else "")
            + (f" | WARNING: {status.scheduler_error}" if status.scheduler_error else ""))


def _local_jobs(jobs: list[JobRow]) -> str:
    by: dict[tuple[str, str], int] = {}
    for j in jobs:
        by.setdefault((j.stage, j.state), 0)
        by[(j.stage, j.state)] += 1
    return ", ".join(f"{stage} {state} x{n}" for (stage, state), n in sorted(by.items()))
