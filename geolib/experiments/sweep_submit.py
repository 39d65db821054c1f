"""The sweep on a cluster: one SLURM job per grid point through ``submitit``.

    python -m geolib.experiments.sweep_submit --params params.yaml --executor slurm \\
        --slurm-partition gpu --timeout-min 240 --gpus 1 [--points NAME ...]
    python -m geolib.experiments.sweep_submit --executor local --points S-b8-wd0-lr0.001-f0.1-s0

Each job trains its point as the stage of its cell, ``sweep_train@<cell>``, trains each of the
cell's points (``python -m geolib.models.designs sweep train <point>``), then measures that point
as the stage ``sweep_measure`` measures each
(``python -m geolib.experiments.sweep measure <point>``), so a job writes exactly what the
stages would (``<run_root>/<cell>/<point>/`` and ``<measures_root>/<point>/``).
A preempted or timed-out job is requeued by submitit (:class:`PointJob` is
``Checkpointable``) and resumes from its last training checkpoint; a finished point does
nothing. Afterwards, ``python -m geolib.experiments.geometry_performance`` (or ``dvc commit`` then
``dvc repro``) gathers every point into the same per-model table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import submitit

from geolib.config import load_params
from geolib.models.grid import check_points_listed, measures_path


class PointJob(submitit.helpers.Checkpointable):
    """One grid point as a submitit job: its training stage's command, then its measuring
    stage's; requeued as-is (training resumes by itself). Returns the point's measures."""

    def __call__(self, params_path: str, name: str, jobs: int = 1) -> dict[str, Any]:
        for stage in (
            ["geolib.models.designs", "sweep", "--params", params_path, "train"],
            ["geolib.experiments.sweep", "--params", params_path, "measure"],
        ):
            subprocess.run([sys.executable, "-m", *stage, name, "--jobs", str(jobs)], check=True)
        root = load_params(params_path)["sweep"]["measures_root"]
        return json.loads(measures_path(root, name).read_text())


def submit(
    params_path: str | Path,
    names: Sequence[str] | None = None,
    *,
    executor: str = "local",
    folder: str | Path = "runs/sweep_jobs/%j",
    timeout_min: int = 60,
    cpus_per_task: int = 2,
    gpus: int = 0,
    slurm_partition: str | None = None,
) -> list[submitit.Job]:
    """Submit ``names`` (default: every point of the sweep) and return the jobs."""
    spec = load_params(params_path)["sweep"]
    all_names = check_points_listed(spec)
    names = list(names or all_names)
    unknown = sorted(set(names) - set(all_names))
    if unknown:
        raise KeyError(f"not points of the sweep: {unknown}")
    if executor not in ("local", "slurm"):
        raise ValueError(f"executor must be 'local' or 'slurm', got {executor!r}")
    ex = submitit.AutoExecutor(folder=str(folder), cluster=executor)
    params: dict[str, Any] = {"timeout_min": timeout_min, "cpus_per_task": cpus_per_task}
    if gpus:
        params["gpus_per_node"] = gpus
    if slurm_partition:
        params["slurm_partition"] = slurm_partition
    ex.update_parameters(name="geolib-sweep", **params)
    # The local executor runs every job at once: each gets the cores split between them.
    jobs_at_once = len(names) if executor == "local" else 1
    with ex.batch():
        jobs = [ex.submit(PointJob(), str(params_path), n, jobs_at_once) for n in names]
    return jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m geolib.experiments.sweep_submit", description=__doc__
    )
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--executor", choices=["local", "slurm"], default="slurm")
    parser.add_argument("--points", nargs="*", help="default: every point of the sweep")
    parser.add_argument("--folder", default="runs/sweep_jobs/%j", help="submitit logs")
    parser.add_argument("--timeout-min", type=int, default=60)
    parser.add_argument("--cpus-per-task", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--slurm-partition")
    parser.add_argument("--wait", action="store_true", help="wait and report each result")
    args = parser.parse_args(argv)
    options = ("executor", "folder", "timeout_min", "cpus_per_task", "gpus", "slurm_partition")
    jobs = submit(args.params, args.points, **{name: getattr(args, name) for name in options})
    print(f"submitted {len(jobs)} jobs: {', '.join(j.job_id for j in jobs)}")
    if args.wait:
        for job in jobs:
            result = job.result()
            print(f"{result['name']}: ID test loss {result['loss']['id_test']['mean']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
