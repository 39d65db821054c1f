"""Fault injection: does a damaged checkpoint, a mistyped parameter or a hostile string turn into
a clear error (caught), a correct result (recovered), a raw error from deep inside (raw) or a
silently wrong number (silent)?

    python -m tests.fault_injection        # from the repository root: one line per fault, a tally

Each fault is injected into a fresh copy of a tiny trained run (or into a direct call) and
classified by what comes back. "caught" needs an exception of the module's own kind whose
message names the damaged thing; anything that returns where an error was due is "silent".
The catalogue grows with the integrity work; a fault listed as silent or raw is a known gap.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

CAUGHT, RECOVERED, RAW, SILENT = "caught", "recovered", "raw", "silent"


def _tiny_run(root: Path) -> Path:
    from tests.test_checkpoints import V, make_tokenizer
    from tests.tiny import train_tiny

    tok = make_tokenizer(root / "tokenizer")
    np.save(root / "train.npy", np.random.default_rng(0).integers(3, V, 4000).astype(np.uint16))
    return train_tiny(
        root / "run",
        tokenizer=tok,
        train_tokens=root / "train.npy",
        total_steps=6,
        checkpoint_every=5,
    )


def expect_error(call: Callable[[], object], kind: type, names: str) -> str:
    """``caught`` if ``call`` raises ``kind`` with ``names`` in the message; ``raw`` for any
    other exception; ``silent`` if it returns."""
    try:
        call()
    except kind as exc:
        return CAUGHT if names in str(exc) else RAW
    except Exception:  # noqa: BLE001 - classified, not handled
        return RAW
    return SILENT


def faults(base: Path, scratch: Path) -> dict[str, Callable[[], str]]:
    from geolib.checkpoints import CheckpointError, load

    def copy() -> Path:
        dst = Path(tempfile.mkdtemp(dir=scratch)) / "run"
        shutil.copytree(base, dst)
        return dst

    def truncated():
        run = copy()
        w = run / "step-6" / "model.safetensors"
        w.write_bytes(w.read_bytes()[:-100])
        return expect_error(lambda: load(run, 6), CheckpointError, str(w))

    def flipped_bytes():
        run = copy()
        w = run / "step-6" / "model.safetensors"
        data = bytearray(w.read_bytes())
        for i in range(len(data) - 400, len(data), 7):
            data[i] ^= 0xFF
        w.write_bytes(bytes(data))
        return expect_error(lambda: load(run, 6), CheckpointError, str(w))

    def header_dtype():
        run = copy()
        w = run / "step-6" / "model.safetensors"
        w.write_bytes(w.read_bytes().replace(b'"F32"', b'"I32"', 1))
        return expect_error(lambda: load(run, 6), CheckpointError, "step-6")

    def edit_config(change: Callable[[dict], object]):
        run = copy()
        path = run / "step-6" / "config.json"
        cfg = json.loads(path.read_text())
        path.write_text(json.dumps(change(cfg)))
        return run

    def fewer_layers():
        run = edit_config(lambda c: {**c, "num_hidden_layers": 1})
        return expect_error(lambda: load(run, 6), CheckpointError, "unexpected")

    def more_layers():
        run = edit_config(lambda c: {**c, "num_hidden_layers": 3})
        return expect_error(lambda: load(run, 6), CheckpointError, "missing")

    def config_list():
        run = edit_config(lambda c: [1, 2])
        return expect_error(lambda: load(run, 6), CheckpointError, "JSON object")

    def corrupt_tokenizer():
        run = copy()
        (run / "tokenizer" / "tokenizer.json").write_text("{broken")
        return expect_error(lambda: load(run, 6), CheckpointError, "tokenizer")

    def mistyped_run():
        run = copy()
        return expect_error(lambda: load(str(run.parent / "rnu")), CheckpointError, "no run")

    def claim_not_string():
        from geolib.claims import Claim

        return expect_error(lambda: Claim("A1", "reproduced", 0.5, "ch"), ValueError, "string")

    def claim_pipe_newline():
        from geolib.claims import Claim, claims_markdown

        md = claims_markdown({"A1": [Claim("A1", "reproduced", "a | b\nc", "ch")]})
        row = next(line for line in md.splitlines() if line.startswith("| **A1**"))
        return RECOVERED if "a \\| b c" in row else SILENT

    def covariance_nan_chunk():
        from geolib.metrics import StreamingCovariance

        acc = StreamingCovariance(3).update(np.ones((4, 3)) + np.eye(4, 3))
        bad = np.ones((10, 3))
        bad[-1, 0] = np.nan
        state = expect_error(lambda: acc.update(bad), ValueError, "NaN")
        return state if acc.count != 4 else (RECOVERED if state == CAUGHT else state)

    def non_psd_c0():
        from geolib.metrics import isoscore_star

        c0 = np.eye(3)
        c0[0, 0] = -0.2
        x = np.random.default_rng(0).standard_normal((20, 3))
        return expect_error(lambda: isoscore_star(x, C0=c0, zeta=0.1), ValueError, "C0")

    def impossible_moments():
        from geolib.theory.curvature import predicted_ratio_from_moments

        return expect_error(lambda: predicted_ratio_from_moments(1.0, 1.0, 0.5), ValueError, "m4")

    def mean_ci_2d():
        from geolib.stats import mean_ci

        return expect_error(lambda: mean_ci(np.ones((3, 2))), ValueError, "one-dimensional")

    def train_config(**bad):
        from geolib.train import TrainConfig

        return expect_error(
            lambda: TrainConfig(vocab_size=64, tokenizer=None, **bad), ValueError, next(iter(bad))
        )

    return {
        "model.safetensors truncated": truncated,
        "model.safetensors: bytes flipped inside tensor data": flipped_bytes,
        "model.safetensors: header dtype F32 → I32": header_dtype,
        "config.json edited to fewer layers": fewer_layers,
        "config.json edited to more layers (a random block)": more_layers,
        "config.json a JSON list": config_list,
        "tokenizer.json corrupt": corrupt_tokenizer,
        "a mistyped local run path": mistyped_run,
        "claim key number not a string": claim_not_string,
        "claim key number with | and a newline": claim_pipe_newline,
        "StreamingCovariance: NaN in a later chunk": covariance_nan_chunk,
        "isoscore_star: C0 not positive semidefinite": non_psd_c0,
        "theory: impossible moments (m4 < m2²)": impossible_moments,
        "stats.mean_ci on 2-D input": mean_ci_2d,
        "TrainConfig lr given as the string '1e-3'": lambda: train_config(lr="1e-3"),
        "TrainConfig grad_accum 0": lambda: train_config(grad_accum=0),
        "TrainConfig eval_interval 0": lambda: train_config(eval_interval=0),
        "TrainConfig mask_prob 2": lambda: train_config(mask_prob=2.0),
        "TrainConfig total_steps -1": lambda: train_config(total_steps=-1),
    }


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = _tiny_run(root / "base")
        results = {}
        for name, inject in faults(base, root).items():
            results[name] = inject()
            print(f"{results[name]:>9}  {name}", flush=True)
    tally = {k: sum(v == k for v in results.values()) for k in (CAUGHT, RECOVERED, RAW, SILENT)}
    print("  ".join(f"{k}: {v}" for k, v in tally.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
