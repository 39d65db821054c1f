"""Choose the SGD learning rate of ``train_olmo_sgd`` (claim A1's optimizer comparison).

Trains the ``train_olmo_sgd`` configuration for ``--steps`` steps at each candidate peak
learning rate (weight decay rescaled so that lr x weight_decay stays at AdamW's peak 2e-4)
and prints the validation loss of each. The rate with the lowest loss goes into params.yaml;
the probe is about the optimizer working at all, not about the frequency measurements, which
it never looks at.

    python benchmarks/probe_sgd_lr.py --lrs 0.1 0.3 1.0 --steps 150
"""

from __future__ import annotations

import argparse
import tempfile
import time

import yaml

from geolib.config import deep_update
from geolib.models.train import train
from geolib.models.train_config import TrainConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--lrs", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    ap.add_argument("--steps", type=int, default=150)
    args = ap.parse_args()
    params = yaml.safe_load(open(args.params))
    base = deep_update(params["train"], params["train_olmo_sgd"])
    shrink = params["train"]["lr"] * params["train"]["weight_decay"]
    for lr in args.lrs:
        p = deep_update(
            base,
            {
                "lr": lr,
                "weight_decay": shrink / lr,
                "total_steps": args.steps,
                "warmup_steps": min(base["warmup_steps"], args.steps // 5),
                "checkpoint_every": args.steps,
                "log_max": 1,
                "eval_interval": args.steps,
            },
        )
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            info = train(TrainConfig.from_params(p), tmp, progress=False)
        print(
            f"lr {lr:g}: validation loss {info['final_val_loss']:.4f} after {args.steps} steps "
            f"(initial {info['initial_val_loss']:.4f}), {time.perf_counter() - t0:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
