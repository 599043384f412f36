"""azhpc bench growth's synthetic runs: shaped like a real run in flight, written where RunPaths says."""

import dataclasses

from alphazero_hpc.net.checkpoint import read_checkpoint
from alphazero_hpc.report import status
from alphazero_hpc.tools.growth import _template, measure, write_synthetic_run


def test_a_synthetic_run_reads_as_a_run_in_flight_and_holds_only_run_folder_files(tmp_path):
    template = _template(tmp_path / "template")
    paths = write_synthetic_run(tmp_path / "run", generations=3, tasks=2, shards=3, template=template)
    assert sorted(p.name for p in paths.root.iterdir()) == ["config.yaml", "launch.json", "models", "selfplay", "train"]
    assert [p.name for p in sorted(paths.model(0).parent.iterdir())] == ["gen-0000.pt", "gen-0001.pt", "gen-0002.pt"]
    read_checkpoint(paths.model(2))
    gens = dataclasses.asdict(status.collect(paths.root))["generations"]
    games = template[2].games
    assert [(g["selfplay"]["shards"], g["selfplay"]["games"], g["train"]["state"]) for g in gens] == \
        [(6, 6 * games, "done"), (6, 6 * games, "done"), (6, 6 * games, "pending")]
    figures = measure(paths, repeats=1)
    assert set(figures) == {"status_s", "status_refresh_s", "train_startup_s", "launch_dry_run_s"}
    assert all(v > 0 for v in figures.values())
