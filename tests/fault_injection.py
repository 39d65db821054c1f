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
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

CAUGHT, RECOVERED, RAW, SILENT = "caught", "recovered", "raw", "silent"


TINY = dict(total_steps=6, checkpoint_every=5)


def _tiny_run(root: Path, max_steps: int | None = None, name: str = "run") -> Path:
    """A tiny finished run in ``root/run`` (with ``max_steps``: one stopped early, in
    ``root/<name>``); the tokenizer and the token file are made once per ``root``."""
    from tests.models.test_checkpoints import V, make_tokenizer
    from tests.tiny import train_tiny

    if not (root / "tokenizer").is_dir():
        make_tokenizer(root / "tokenizer")
        ids = np.random.default_rng(0).integers(3, V, 4000).astype(np.uint16)
        np.save(root / "train.npy", ids)
    return train_tiny(
        root / name,
        tokenizer=root / "tokenizer",
        train_tokens=root / "train.npy",
        max_steps=max_steps,
        **TINY,
    )


def _resume_tiny(root: Path, run: Path) -> Path:
    from tests.tiny import train_tiny

    return train_tiny(run, tokenizer=root / "tokenizer", train_tokens=root / "train.npy", **TINY)


def same_run(a: Path, b: Path) -> bool:
    """Every metrics row (but tokens/s) and every checkpoint's weights are identical."""

    def rows(run: Path) -> list[list[str]]:
        return [r.split(",")[:5] for r in (run / "metrics.csv").read_text().splitlines()]

    steps = sorted(p.name for p in a.glob("step-*"))
    return (
        rows(a) == rows(b)
        and steps == sorted(p.name for p in b.glob("step-*"))
        and all(
            (a / s / "model.safetensors").read_bytes() == (b / s / "model.safetensors").read_bytes()
            for s in steps
        )
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
    """The catalogue: fault name → a function that injects it and returns its outcome.
    ``base`` is a finished :func:`_tiny_run`; beside it, ``partial`` is the same run stopped
    after 5 of 6 steps (made here if missing)."""
    from geolib.models.checkpoints import CheckpointError, load

    root = base.parent
    partial = root / "partial"
    if not partial.is_dir():
        _tiny_run(root, max_steps=5, name="partial")

    def copy(src: Path = base) -> Path:
        dst = Path(tempfile.mkdtemp(dir=scratch)) / "run"
        shutil.copytree(src, dst)
        return dst

    def resumed(damage: Callable[[Path], object]) -> str:
        """Damage a copy of the stopped run, resume it: ``recovered`` if it ends as the
        uninterrupted run did, ``silent`` if it ends otherwise, ``raw`` on an error."""
        run = copy(partial)
        damage(run)
        try:
            _resume_tiny(root, run)
        except Exception:  # noqa: BLE001 - classified, not handled
            return RAW
        return RECOVERED if same_run(base, run) else SILENT

    def partial_metrics_row(run: Path) -> None:
        path = run / "metrics.csv"
        path.write_text(path.read_text() + "6,384,4.1")

    def flip(path: Path) -> None:
        data = bytearray(path.read_bytes())
        for i in range(len(data) // 2, len(data), 53):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))

    def half_written_checkpoint(run: Path) -> None:
        tmp = run / "step-6.tmp"
        tmp.mkdir()
        (tmp / "model.safetensors").write_bytes(b"half")

    def replaced_tokens():
        run = copy(partial)
        tokens = root / "train.npy"
        original = tokens.read_bytes()
        np.save(tokens, np.load(tokens)[::-1].copy())  # other data under the same path
        try:
            return expect_error(lambda: _resume_tiny(root, run), ValueError, "other data")
        finally:
            tokens.write_bytes(original)

    def params_file(text: str) -> Path:
        path = Path(tempfile.mkdtemp(dir=scratch)) / "params.yaml"
        path.write_text(text)
        return path

    def bad_params(text: str, names: str):
        from geolib.config import stage_params

        path = params_file(text)
        return expect_error(lambda: stage_params(path, "stage"), ValueError, names)

    def lr_string():
        from geolib.config import stage_params

        p = stage_params(params_file("stage:\n  lr: 1e-3\n"), "stage")
        return RECOVERED if p["lr"] == 1e-3 and isinstance(p["lr"], float) else SILENT

    def train_lr_string():
        from geolib.models.train_config import TrainConfig

        cfg = TrainConfig(vocab_size=64, tokenizer=None, lr="1e-3")
        return RECOVERED if cfg.lr == 1e-3 else SILENT

    def model_flag_string():
        from geolib.models.families import ModelConfig

        return expect_error(
            lambda: ModelConfig(tie_embeddings="false"), ValueError, "tie_embeddings"
        )

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

    def damaged_gguf():
        """The fetched pretrained model with its low bits flipped (as a disk error would)."""
        import hashlib
        import json

        from geolib.models.pretrained import load_gguf

        folder = Path(tempfile.mkdtemp(dir=scratch))
        (folder / "model").mkdir()
        body = bytes(range(256)) * 64
        (folder / "datasheet.json").write_text(
            json.dumps({"model_file": "m.gguf", "model_sha256": hashlib.sha256(body).hexdigest()})
        )
        (folder / "model" / "m.gguf").write_bytes(bytes(b ^ 1 for b in body))
        return expect_error(lambda: load_gguf(folder / "model", "m.gguf"), ValueError, "m.gguf")

    def mistyped_run():
        run = copy()
        return expect_error(lambda: load(str(run.parent / "rnu")), CheckpointError, "no run")

    def claim_not_string():
        from geolib.verdicts.claims import Claim

        return expect_error(lambda: Claim("A1", "reproduced", 0.5, "ch"), ValueError, "string")

    def claim_pipe_newline():
        from geolib.verdicts.claims import Claim, claims_markdown

        md = claims_markdown({"A1": [Claim("A1", "reproduced", "a | b\nc", "ch", scale="s")]})
        row = next(line for line in md.splitlines() if line.startswith("| **A1:"))
        return RECOVERED if "a \\| b c" in row else SILENT

    def claim_html(field: str):
        """An edited claims file with a live HTML tag in a text field: the book must show the
        characters (``recovered``), never the tag (``silent``)."""
        from markdown_it import MarkdownIt

        from geolib.verdicts.claims import Claim, claims_markdown

        evil = "<img src=x onerror=alert(document.domain)>"
        claim = Claim(
            "A2",
            "reproduced",
            chapter="chord_arc",
            **{"key_number": "k", "scale": "s", field: evil},
        )
        md = claims_markdown({"A2": [claim]})
        # the table directive's body is Markdown in the book: render it as such. Without the
        # directive found, a plain render would show the table as code and hide any tag.
        directive = re.search(r"```\{table\}\n(?::[^\n]*\n)*(.*?)```", md, re.DOTALL)
        if directive is None:
            raise AssertionError("claims_markdown wrote no ```{table} directive")
        rendered = MarkdownIt("commonmark").enable("table").render(directive.group(1))
        return SILENT if "<img" in rendered else RECOVERED

    def claim_link_name():
        from geolib.verdicts.claims import Claim

        return expect_error(
            lambda: Claim("A2", "reproduced", "k", "chord_arc", anchor="x <javascript:y>"),
            ValueError,
            "anchor must be a bare name",
        )

    def covariance_nan_chunk():
        from geolib.measure.metrics import StreamingCovariance

        acc = StreamingCovariance(3).update(np.ones((4, 3)) + np.eye(4, 3))
        bad = np.ones((10, 3))
        bad[-1, 0] = np.nan
        state = expect_error(lambda: acc.update(bad), ValueError, "NaN")
        return state if acc.count != 4 else (RECOVERED if state == CAUGHT else state)

    def non_psd_c0():
        from geolib.measure.metrics import isoscore_star

        c0 = np.eye(3)
        c0[0, 0] = -0.2
        x = np.random.default_rng(0).standard_normal((20, 3))
        return expect_error(lambda: isoscore_star(x, C0=c0, zeta=0.1), ValueError, "C0")

    def impossible_moments():
        from geolib.theory.curvature import predicted_ratio_from_moments

        return expect_error(lambda: predicted_ratio_from_moments(1.0, 1.0, 0.5), ValueError, "m4")

    def mean_ci_2d():
        from geolib.measure.stats import mean_ci

        return expect_error(lambda: mean_ci(np.ones((3, 2))), ValueError, "one-dimensional")

    def diverged_training() -> str:
        """lr 1000 from the first step: training must stop with an error naming the run and
        leave it marked (no run.json); resuming, loading and reading it must each be refused,
        naming it. ``caught`` only if all four are."""
        from geolib.models import runs
        from tests.tiny import train_tiny

        run = Path(tempfile.mkdtemp(dir=scratch)) / "diverged"

        def training() -> Path:
            return train_tiny(
                run,
                tokenizer=root / "tokenizer",
                train_tokens=root / "train.npy",
                lr=1000.0,
                warmup_steps=1,
                grad_clip=None,
                **TINY,
            )

        outcomes = [expect_error(training, runs.DivergedRunError, str(run))]
        if (run / runs.RUN_INFO).exists():
            return SILENT
        for read in (training, lambda: load(run, 0), lambda: runs.read_run_info(run)):
            outcomes.append(expect_error(read, runs.DivergedRunError, f"{run} diverged"))
        for outcome in (SILENT, RAW):
            if outcome in outcomes:
                return outcome
        return CAUGHT

    def swapped_steps() -> str:
        """step-5 and step-6 swapped, manifests and all: loading step 6 must refuse."""
        run = copy()
        (run / "step-5").rename(run / "swap")
        (run / "step-6").rename(run / "step-5")
        (run / "swap").rename(run / "step-6")
        return expect_error(lambda: load(run, 6), CheckpointError, "swapped")

    def edited_tokenizer() -> str:
        """The run's tokenizer edited into valid JSON with another mask id (2 → 100)."""
        run = copy()
        path = run / "tokenizer" / "tokenizer.json"
        path.write_text(path.read_text().replace('"id": 2', '"id": 100', 1))
        return expect_error(lambda: load(run, 6), CheckpointError, "tokenizer.json")

    def second_trainer() -> str:
        """A second trainer started on a run directory that one is writing."""
        from geolib.models import runs

        run = copy(partial)
        with runs.sole_writer(run):
            outcome = expect_error(lambda: _resume_tiny(root, run), runs.RunLockedError, str(run))
        return outcome if not list(run.glob("step-*.tmp")) else SILENT

    def disk_full() -> str:
        """torch's own error on a full disk while a checkpoint is written: a clear error
        naming the step and path, no step-N.tmp left, the checkpoints before it intact."""
        from unittest import mock

        import torch

        from geolib.models import runs
        from geolib.models.resume import CheckpointWriteError

        run = copy(partial)
        before = {p.name: (p / "model.safetensors").read_bytes() for p in run.glob("step-*")}
        full = RuntimeError(
            "[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing "
            "file data/0: file write failed"
        )
        usage = shutil.disk_usage(run)._replace(free=1 << 20)
        with (
            mock.patch.object(torch, "save", side_effect=full),
            mock.patch("shutil.disk_usage", return_value=usage),
        ):
            outcome = expect_error(
                lambda: _resume_tiny(root, run),
                CheckpointWriteError,
                f"no space left while writing step 6 to {run / 'step-6.tmp'}",
            )
        after = {p.name: (p / "model.safetensors").read_bytes() for p in run.glob("step-*")}
        intact = after == before and runs.available_steps(run)[-1] == 5
        return outcome if intact else SILENT

    def safetensors_full() -> str:
        """safetensors' own error (not an OSError) on a full disk while the weights are
        written: the same clear error, no step-N.tmp left."""
        from unittest import mock

        from safetensors import SafetensorError
        from transformers import PreTrainedModel

        from geolib.models.resume import CheckpointWriteError

        run = copy(partial)
        full = SafetensorError("Error while serializing: IoError(No space left on device)")
        with mock.patch.object(PreTrainedModel, "save_pretrained", side_effect=full):
            outcome = expect_error(lambda: _resume_tiny(root, run), CheckpointWriteError, "step 6")
        return outcome if not list(run.glob("step-*.tmp")) else SILENT

    def other_code(supersede: bool) -> str:
        """A finished run, and the training code has changed since. By hand: refused, naming
        the file, nothing moved. From the pipeline (``--supersede-into``): the old run is moved
        aside whole and the run retrained (here the code is the same in truth, so the retrained
        run must equal the old one)."""
        from unittest import mock

        from geolib.models import runs, train
        from geolib.models.resume import RunIdentityError, code_hashes

        run = copy()
        cfg = train.TrainConfig.from_params(runs.read_run_info(run)["config"])
        edited = {**code_hashes(), "geolib/models/families.py": "0" * 64}
        aside = Path(tempfile.mkdtemp(dir=scratch)) / "aside"
        with mock.patch.object(train, "code_hashes", return_value=edited):
            if not supersede:
                outcome = expect_error(
                    lambda: train.train(cfg, run, progress=False),
                    RunIdentityError,
                    "'geolib/models/families.py'",
                )
                return outcome if (run / runs.RUN_INFO).is_file() else SILENT
            try:
                train.train(cfg, run, progress=False, supersede_into=aside)
            except Exception:  # noqa: BLE001 - classified
                return RAW
        (moved,) = aside.iterdir()
        return RECOVERED if same_run(moved, run) and same_run(base, run) else SILENT

    def token_file(damage: Callable[[Path], object], names: str) -> str:
        """A damaged token file read by an analysis stage's reader (the one reader)."""
        from geolib.data.tokens import load_tokens
        from tests.models.test_checkpoints import V

        path = Path(tempfile.mkdtemp(dir=scratch)) / "tokens.npy"
        np.save(path, np.random.default_rng(1).integers(3, V, 2000).astype(np.uint16))
        damage(path)
        return expect_error(lambda: load_tokens(path, V), ValueError, names)

    def truncate(path: Path) -> None:
        path.write_bytes(path.read_bytes()[:1000])

    def out_of_vocabulary(path: Path) -> None:
        from tests.models.test_checkpoints import V

        ids = np.load(path)
        ids[7] = V + 3
        np.save(path, ids)

    def cuda_without_gpu() -> str:
        import torch

        from geolib.models.device import DeviceUnavailableError, resolve_device

        if torch.cuda.is_available():
            return CAUGHT  # not injectable where a GPU exists
        return expect_error(lambda: resolve_device("cuda"), DeviceUnavailableError, "no CUDA")

    def other_thread_count() -> str:
        """A finished run rerun with another thread count (another GEOLIB_JOBS): nothing to
        compute, so nothing refused and nothing rewritten; an unfinished one is refused with
        advice that keeps it (resume with its thread count), every file left as it was."""
        from tests.tiny import tree_hashes

        run = copy()
        before = tree_hashes(run)
        try:
            _resume_tiny_with(run, num_threads=1)
        except Exception:  # noqa: BLE001 - classified
            return RAW
        if tree_hashes(run) != before:
            return SILENT
        stopped = copy(partial)
        before = tree_hashes(stopped)
        outcome = expect_error(
            lambda: _resume_tiny_with(stopped, num_threads=1), ValueError, "resume it with the same"
        )
        return RECOVERED if outcome == CAUGHT and tree_hashes(stopped) == before else outcome

    def _resume_tiny_with(run: Path, **cfg) -> Path:
        import torch

        from tests.tiny import train_tiny

        threads = torch.get_num_threads()  # training sets it: later runs must not inherit it
        try:
            return train_tiny(
                run, tokenizer=root / "tokenizer", train_tokens=root / "train.npy", **TINY, **cfg
            )
        finally:
            torch.set_num_threads(threads)

    def train_config(**bad):
        from geolib.models.train_config import TrainConfig

        return expect_error(
            lambda: TrainConfig(vocab_size=64, tokenizer=None, **bad), ValueError, next(iter(bad))
        )

    return {
        "metrics.csv: a kill left an incomplete last row": lambda: resumed(partial_metrics_row),
        "train_state.pt: bytes flipped (latest checkpoint)": lambda: resumed(
            lambda run: flip(run / "step-5" / "train_state.pt")
        ),
        "resume weights: bytes flipped (latest checkpoint)": lambda: resumed(
            lambda run: flip(run / "step-5" / "model.safetensors")
        ),
        "a kill during a checkpoint write (step-N.tmp left)": lambda: resumed(
            half_written_checkpoint
        ),
        "training tokens replaced under the same path": replaced_tokens,
        "params: invalid YAML": lambda: bad_params("stage: [1, 2\n", "params.yaml"),
        "params: a null section": lambda: bad_params("stage:\n", "'stage'"),
        "params: a scalar section": lambda: bad_params("stage: 3\n", "'stage'"),
        "params: an empty section": lambda: bad_params("stage: {}\n", "'stage'"),
        "params: lr: 1e-3 (a string to PyYAML)": lr_string,
        "model.safetensors truncated": truncated,
        "model.safetensors: bytes flipped inside tensor data": flipped_bytes,
        "model.safetensors: header dtype F32 → I32": header_dtype,
        "config.json edited to fewer layers": fewer_layers,
        "config.json edited to more layers (a random block)": more_layers,
        "config.json a JSON list": config_list,
        "tokenizer.json corrupt": corrupt_tokenizer,
        "a mistyped local run path": mistyped_run,
        "the pretrained GGUF file with bits flipped": damaged_gguf,
        "claim key number not a string": claim_not_string,
        "claim key number with | and a newline": claim_pipe_newline,
        "claim key number with an <img onerror> tag": lambda: claim_html("key_number"),
        "claim robustness word with an <img onerror> tag": lambda: claim_html("robust"),
        "claim scale with an <img onerror> tag": lambda: claim_html("scale"),
        "claim anchor that would break out of its link": claim_link_name,
        "StreamingCovariance: NaN in a later chunk": covariance_nan_chunk,
        "isoscore_star: C0 not positive semidefinite": non_psd_c0,
        "theory: impossible moments (m4 < m2²)": impossible_moments,
        "stats.mean_ci on 2-D input": mean_ci_2d,
        "TrainConfig lr given as the string '1e-3'": train_lr_string,
        "TrainConfig lr given as the string 'fast'": lambda: train_config(lr="fast"),
        "ModelConfig tie_embeddings given as the string 'false'": model_flag_string,
        "TrainConfig grad_accum 0": lambda: train_config(grad_accum=0),
        "TrainConfig eval_interval 0": lambda: train_config(eval_interval=0),
        "TrainConfig mask_prob 2": lambda: train_config(mask_prob=2.0),
        "TrainConfig total_steps -1": lambda: train_config(total_steps=-1),
        "TrainConfig lr .inf": lambda: train_config(lr=float("inf")),
        "TrainConfig grad_clip .inf": lambda: train_config(grad_clip=float("inf")),
        "TrainConfig weight_decay -.inf": lambda: train_config(weight_decay=float("-inf")),
        "training diverges (lr 1000): stops, marked, refused when resumed, loaded or read": (
            diverged_training
        ),
        "two checkpoint folders swapped (manifests moved with them)": swapped_steps,
        "the run's tokenizer edited (mask id 2 → 100)": edited_tokenizer,
        "a second trainer on a run directory being written": second_trainer,
        "disk full while a checkpoint is written": disk_full,
        "a token file truncated (the analysis stages' reader)": lambda: token_file(
            truncate, "truncated"
        ),
        "a token file with an id outside the vocabulary": lambda: token_file(
            out_of_vocabulary, ">= vocab_size"
        ),
        "common.device: cuda on a machine without a GPU": cuda_without_gpu,
        "a run rerun with another thread count (GEOLIB_JOBS)": other_thread_count,
        "weights write fails with safetensors' SafetensorError": safetensors_full,
        "a finished run whose training code changed, by hand": lambda: other_code(False),
        "the same, from a pipeline stage (--supersede-into)": lambda: other_code(True),
        "params: a section given twice (DVC refuses it)": lambda: bad_params(
            "stage:\n  a: 1\nstage:\n  a: 2\n", "'stage' given twice"
        ),
        "params: a 504-byte alias bomb": lambda: bad_params(
            "stage:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
            + "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)),
            "alias bomb",
        ),
        "params: a list where a section is due": lambda: bad_params(
            "stage: {a: 1}\ncommon: [1, 2]\n", "'common' must be a mapping"
        ),
        "TrainConfig model: null": lambda: expect_error(
            lambda: __import__("geolib.models.train").models.train.TrainConfig.from_params(
                {"vocab_size": 64, "tokenizer": None, "model": None}
            ),
            ValueError,
            "TrainConfig.model",
        ),
        "TrainConfig total_steps '1e400'": lambda: train_config(total_steps="1e400"),
        "TrainConfig warmup_steps above total_steps": lambda: train_config(
            warmup_steps=2000, total_steps=1000
        ),
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
    return 1 if tally[SILENT] or tally[RAW] else 0


if __name__ == "__main__":
    raise SystemExit(main())
