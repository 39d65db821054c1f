"""One loader for our training runs (by step) and for hub models (by revision).

    model, tokenizer = load("runs/pythia", 512)                     # our run, step 512
    model, tokenizer = load("runs/pythia")                          # our run, latest step
    model, tokenizer = load("EleutherAI/pythia-70m", "step1000")    # hub, revision step1000
    model, tokenizer = load("EleutherAI/pythia-70m", 1000)          # same (int → "step1000")

Hub models go through ``from_pretrained(repo, revision=...)``: with network access they are
downloaded into the Hugging Face cache; offline (``HF_HUB_OFFLINE=1`` read at call time, or
``local_files_only=True``) they are read from the cache (``HF_HUB_CACHE`` or ``cache_dir``),
whose ``refs/<revision>`` files map revisions such as ``step1000`` to snapshots. The model class
follows ``config.architectures`` (causal LM or masked LM), so every analysis runs unchanged on
our miniature runs and on Pythia/OLMo checkpoints at paper scale.

Missing or corrupt files raise :class:`CheckpointError` naming the file and listing the steps
(or cached revisions) that are available. A checkpoint of ours must also match the content
hashes its manifest recorded when it was written (``geolib.models.runs``), so damage that keeps the
file's structure intact (flipped bytes, an edited header) is refused too.
"""

from __future__ import annotations

import json
import numbers
import os
import re
import struct
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

from geolib.models.families import quiet_progress
from geolib.models.runs import (
    CONFIG_FILE,
    TOKENIZER,
    TRAINER_STATE,
    WEIGHT_FILE,
    IntegrityError,
    available_steps,
    folder_step,
    is_run_dir,
    read_run_info,
    refuse_diverged,
    step_dir,
    verify_folder,
    verify_manifest,
    verify_step,
)

_TRUTHY = {"1", "true", "yes", "on"}


class CheckpointError(RuntimeError):
    """A checkpoint cannot be loaded (the message names the file and what is available)."""


class MissingCheckpointError(CheckpointError, FileNotFoundError):
    """The requested step, revision or file does not exist."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file exists but cannot be read (truncated, bad header, bad JSON)."""


# ----------------------------------------------------------------------------- our runs


def _parse_step(step: int | str | None) -> int | None:
    if step is None or step == "latest":
        return None
    try:
        number = revision_step(step)
    except ValueError:
        number = -1
    if number < 0:
        raise ValueError(f"not a step: {step!r} (use an int, 'stepN', 'step-N' or 'latest')")
    return number


def checkpoint_dir(run_dir: str | Path, step: int | str | None = None) -> Path:
    """The ``step-N`` folder of ``run_dir`` (``None``/``"latest"``: the last one), checked."""
    run_dir = Path(run_dir)
    steps = available_steps(run_dir)
    wanted = _parse_step(step)
    if wanted is None:
        if not steps:
            raise MissingCheckpointError(f"no checkpoint in {run_dir} (no complete step-N folder)")
        wanted = steps[-1]
    folder = step_dir(run_dir, wanted)
    if not folder.is_dir():
        raise MissingCheckpointError(
            f"no checkpoint for step {wanted}: {folder} does not exist; available steps: {steps}"
        )
    for name in (CONFIG_FILE, WEIGHT_FILE):
        if not (folder / name).is_file():
            raise MissingCheckpointError(
                f"checkpoint file missing: {folder / name}; available steps: {steps}"
            )
    return folder


def check_safetensors(path: str | Path) -> None:
    """Raise :class:`CorruptCheckpointError` unless ``path`` is a complete safetensors file
    (header readable and the data section exactly as long as the header says)."""
    path = Path(path)
    size = path.stat().st_size
    try:
        with path.open("rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                raise ValueError("shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", raw)
            if n > size - 8:
                raise ValueError(f"header of {n} bytes but the file has {size} bytes")
            header = json.loads(fh.read(n))
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
        expected = 8 + n + max(ends, default=0)
        if size != expected:
            raise ValueError(f"{size} bytes but the header describes {expected} (truncated?)")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(f"corrupt checkpoint file {path}: {exc}") from exc


def _check_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(f"corrupt checkpoint file {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise CorruptCheckpointError(
            f"corrupt checkpoint file {path}: expected a JSON object, got {type(config).__name__}"
        )
    return config


def _strict(loaded, where: str):
    """The model of ``from_pretrained(..., output_loading_info=True)``, or an error naming the
    weights the file lacks, the ones the model does not know and the ones of another shape: a
    config edited to fewer layers or another architecture must not yield a partly random
    model (transformers only prints a load report)."""
    model, info = loaded
    problems = {
        "missing (left at random initialisation)": sorted(info.get("missing_keys") or []),
        "unexpected (in the file, not in the model)": sorted(info.get("unexpected_keys") or []),
        "of another shape": sorted(str(k) for k in info.get("mismatched_keys") or []),
    }
    bad = {k: v for k, v in problems.items() if v}
    if bad:
        detail = "; ".join(
            f"{len(v)} weights {k}: {', '.join(v[:6])}{' …' if len(v) > 6 else ''}"
            for k, v in bad.items()
        )
        raise CorruptCheckpointError(f"{where}: the weights do not match the config: {detail}")
    return model


def _tokenizer(folder: Path):
    """The tokenizer saved in ``folder``, or an error naming the folder and its files."""
    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # noqa: BLE001 - re-raised with the folder named
        files = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        raise CorruptCheckpointError(
            f"cannot read the tokenizer in {folder} (files: {files}): {' '.join(str(exc).split())}"
        ) from exc


# ----------------------------------------------------------------------------- hub cache


def _offline(local_files_only: bool | None) -> bool:
    if local_files_only is not None:
        return local_files_only
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUTHY or bool(constants.HF_HUB_OFFLINE)


def _cache_dir(cache_dir: str | Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def available_revisions(repo_id: str, cache_dir: str | Path | None = None) -> list[str]:
    """Revisions of ``repo_id`` present in the local Hugging Face cache (``refs/``), in
    natural order (``step2`` before ``step10``)."""
    refs = _cache_dir(cache_dir) / f"models--{repo_id.replace('/', '--')}" / "refs"
    if not refs.is_dir():
        return []
    return sorted((p.name for p in refs.iterdir() if p.is_file()), key=_natural)


def hub_revision(step_or_revision: int | str | None) -> str:
    """``1000`` → ``"step1000"`` (Pythia's naming); ``None`` → ``"main"``; strings as given."""
    if step_or_revision is None:
        return "main"
    if isinstance(step_or_revision, int):
        return f"step{step_or_revision}"
    return step_or_revision


# ----------------------------------------------------------------------------- loading


def _model_class(architectures: list[str] | None) -> type:
    """The ``transformers`` class named in ``config.architectures`` (else an Auto class)."""
    for arch in architectures or []:
        cls = getattr(transformers, arch, None)
        if cls is not None:
            return cls
    if any("MaskedLM" in a for a in architectures or []):
        return AutoModelForMaskedLM
    return AutoModelForCausalLM


def _finish(model, device, eval_mode: bool):
    model = model.to(device)
    if eval_mode:
        model.eval()
    return model


def load_run(
    run_dir: str | Path,
    step: int | str | None = None,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = torch.float32,
    attn_implementation: str | None = "sdpa",
    tokenizer: bool = True,
    eval_mode: bool = True,
):
    """Our run at ``step`` (``None``: latest) → ``(model, tokenizer)``; the tokenizer comes
    from ``run_dir/tokenizer`` (``None`` if the run was trained without one)."""
    run_dir = Path(run_dir)
    folder = checkpoint_dir(run_dir, step)
    try:
        config = _check_config(folder / CONFIG_FILE)
        check_safetensors(folder / WEIGHT_FILE)
        cls = _model_class(config.get("architectures"))
        try:
            with quiet_progress():
                loaded = cls.from_pretrained(
                    folder,
                    dtype=dtype,
                    attn_implementation=attn_implementation,
                    output_loading_info=True,
                )
        except Exception as exc:  # noqa: BLE001 - re-raised with the file named
            raise CorruptCheckpointError(
                f"cannot load checkpoint {folder / WEIGHT_FILE}: {exc}"
            ) from exc
        model = _strict(loaded, str(folder))
        try:  # the files are the ones training wrote (flipped bytes keep the structure intact)
            verify_manifest(folder, [WEIGHT_FILE, CONFIG_FILE, TRAINER_STATE])
            verify_step(folder, folder_step(folder))  # not another step's folder renamed
        except IntegrityError as exc:
            raise CorruptCheckpointError(f"step {folder.name}: {exc}") from exc
    except CorruptCheckpointError as exc:
        raise CorruptCheckpointError(f"{exc}; available steps: {available_steps(run_dir)}") from exc
    tok = None
    if tokenizer and (run_dir / TOKENIZER).is_dir():
        try:  # the run's tokenizer is the one it trained with, every file of it
            verify_folder(run_dir / TOKENIZER)
        except IntegrityError as exc:
            raise CorruptCheckpointError(f"the run's tokenizer: {exc}") from exc
        tok = _tokenizer(run_dir / TOKENIZER)
    return _finish(model, device, eval_mode), tok


def load_hub(
    repo_id: str,
    revision: int | str | None = None,
    *,
    cache_dir: str | Path | None = None,
    local_files_only: bool | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = torch.float32,
    attn_implementation: str | None = "sdpa",
    tokenizer: bool = True,
    eval_mode: bool = True,
):
    """A hub model at ``revision`` (int ``N`` → ``"stepN"``) → ``(model, tokenizer)``."""
    rev = hub_revision(revision)
    offline = _offline(local_files_only)
    cache = _cache_dir(cache_dir)
    kw = {"revision": rev, "cache_dir": str(cache), "local_files_only": offline}

    def fail(what: str, exc: Exception, kind=MissingCheckpointError):
        cached = available_revisions(repo_id, cache)
        mode = "offline, from the cache " + str(cache) if offline else "from the hub"
        return kind(
            f"cannot load {what} of {repo_id} at revision {rev!r} ({mode}): "
            f"{' '.join(str(exc).split())}; "
            f"cached revisions: {cached}"
        )

    if offline and not re.fullmatch(r"[0-9a-f]{40}", rev):
        cached = available_revisions(repo_id, cache)
        if rev not in cached:
            raise MissingCheckpointError(
                f"revision {rev!r} of {repo_id} is not in the cache {cache} (offline); "
                f"cached revisions: {cached}"
            )
    try:
        config = AutoConfig.from_pretrained(repo_id, **kw)
    except (OSError, ValueError) as exc:
        raise fail("config", exc) from exc

    from huggingface_hub import try_to_load_from_cache

    cached_weights = try_to_load_from_cache(
        repo_id, WEIGHT_FILE, cache_dir=str(cache), revision=rev
    )
    if isinstance(cached_weights, str) and Path(cached_weights).is_file():
        check_safetensors(cached_weights)
    try:
        with quiet_progress():
            loaded = _model_class(config.architectures).from_pretrained(
                repo_id,
                dtype=dtype,
                attn_implementation=attn_implementation,
                output_loading_info=True,
                **kw,
            )
    except OSError as exc:
        raise fail("weights", exc) from exc
    except Exception as exc:  # noqa: BLE001 - corrupt file deep inside transformers
        raise fail("weights", exc, CorruptCheckpointError) from exc
    model = _strict(loaded, f"{repo_id} at revision {rev!r}")
    tok = None
    if tokenizer:
        try:
            tok = AutoTokenizer.from_pretrained(repo_id, **kw)
        except (OSError, ValueError) as exc:
            raise fail("tokenizer", exc) from exc
    return _finish(model, device, eval_mode), tok


def load(source: str | Path, step_or_revision: int | str | None = None, **kwargs):
    """``(model, tokenizer)`` from one of our runs or from a hub repository.

    ``source`` is a run directory (``runs/pythia``; then ``step_or_revision`` is a step,
    ``None`` = latest), a plain ``save_pretrained`` folder, or a hub id (``org/name``; then it
    is a revision, an int ``N`` meaning ``"stepN"``, ``None`` meaning ``"main"``). Keyword
    arguments go to :func:`load_run` / :func:`load_hub` (``device``, ``dtype``, ``cache_dir``,
    ``local_files_only``, ``tokenizer``, ``eval_mode``, ``attn_implementation``).
    The model is returned in eval mode on ``device`` (float32 unless ``dtype`` says otherwise).
    """
    path = Path(source)
    if path.is_dir():
        hub_only = {"cache_dir", "local_files_only"}
        run_kwargs = {k: v for k, v in kwargs.items() if k not in hub_only}
        if is_run_dir(path):
            refuse_diverged(path)
            return load_run(path, step_or_revision, **run_kwargs)
        if (path / CONFIG_FILE).is_file():
            if step_or_revision is not None:
                raise ValueError(f"{path} is a single model folder; it has no steps")
            return _load_folder(path, **run_kwargs)
        raise MissingCheckpointError(f"{path} is neither a run directory nor a model folder")
    if isinstance(source, Path) or not re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)):
        raise MissingCheckpointError(f"no run directory {path} (and it is not a hub id)")
    if path.parent.is_dir():  # "runs/pyhtia" beside runs/: a mistyped run, not a hub id
        local = sorted(p.name for p in path.parent.iterdir() if p.is_dir() and is_run_dir(p))
        raise MissingCheckpointError(
            f"no run directory {path}; {path.parent}/ holds the runs {local}. (A hub id whose "
            f"organisation is also a local folder: rename or move the folder {path.parent}.)"
        )
    try:
        return load_hub(str(source), step_or_revision, **kwargs)
    except MissingCheckpointError as exc:
        raise MissingCheckpointError(f"{exc} (no local directory {path} either)") from exc


def _load_folder(folder: Path, *, tokenizer: bool = True, **kwargs):
    config = _check_config(folder / CONFIG_FILE)
    if (folder / WEIGHT_FILE).is_file():
        check_safetensors(folder / WEIGHT_FILE)
    cls = _model_class(config.get("architectures"))
    device, eval_mode = kwargs.pop("device", "cpu"), kwargs.pop("eval_mode", True)
    kwargs.setdefault("dtype", torch.float32)
    kwargs.setdefault("attn_implementation", "sdpa")
    with quiet_progress():
        model = _strict(
            cls.from_pretrained(folder, output_loading_info=True, **kwargs), str(folder)
        )
    tok = None
    if tokenizer and any(
        (folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")
    ):
        tok = _tokenizer(folder)
    return _finish(model, device, eval_mode), tok


def vocab_size_of(source: str | Path, step_or_revision: int | str | None = None) -> int:
    """The vocabulary size of a run, model folder or hub model, from its config alone (no
    weights loaded): what a token file read for it must stay below."""
    path = Path(source)
    if path.is_dir():
        folder = checkpoint_dir(path, step_or_revision) if is_run_dir(path) else path
        config = _check_config(folder / CONFIG_FILE)
    else:
        rev = hub_revision(step_or_revision)
        try:
            config = AutoConfig.from_pretrained(
                str(source), revision=rev, local_files_only=_offline(None)
            ).to_dict()
        except (OSError, ValueError) as exc:
            raise MissingCheckpointError(
                f"cannot read the config of {source} at revision {rev!r}: {exc}"
            ) from exc
    size = config.get("vocab_size")
    if not isinstance(size, int) or size < 1:
        raise CorruptCheckpointError(f"{source}: config has no valid vocab_size ({size!r})")
    return size


def is_hub_id(source: str | Path) -> bool:
    """Whether ``source`` names a hub model: ``org/name`` where neither it nor ``org`` is a
    local folder (``runs/pyhtia`` beside ``runs/`` is a mistyped run, as :func:`load` says)."""
    path = Path(source)
    return (
        not path.exists()
        and not path.parent.is_dir()
        and bool(re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)))
    )


def shared_vocab_size(sources: list[str], revisions: list[str | int] | None = None) -> int:
    """The smallest vocabulary among ``sources`` (each at its first checkpoint): token ids
    below it are valid input for every one of them. Our runs and local model folders only: a
    hub model reads text in its own tokenizer, and the pipeline's ids would be valid numbers
    naming other words (:func:`shared_tokenizer` is its path)."""
    hub = [s for s in sources if is_hub_id(s)]
    if hub:
        raise ValueError(
            f"{hub}: a hub model reads text encoded with its own tokenizer, not the pipeline's "
            "token files (valid ids, other words); give the section a `text` file instead"
        )
    return min(vocab_size_of(s, checkpoints_of(s, revisions)[0]) for s in sources)


#: a text every tokenizer of a suite must encode identically to count as the same tokenizer
_PROBE = "The geometry of representations: 1,024 tokens, naïve café — and \t<tab>."


def hub_tokenizer(repo_id: str, revision: int | str | None = None, cache_dir=None):
    """The tokenizer of hub model ``repo_id`` at ``revision`` (offline where the hub is)."""
    rev = hub_revision(revision)
    kw = {"revision": rev, "cache_dir": str(_cache_dir(cache_dir))}
    try:
        return AutoTokenizer.from_pretrained(repo_id, local_files_only=_offline(None), **kw)
    except (OSError, ValueError) as exc:
        raise MissingCheckpointError(
            f"cannot load the tokenizer of {repo_id} at revision {rev!r}: "
            f"{' '.join(str(exc).split())}"
        ) from exc


def shared_tokenizer(sources: list[str], revisions: list[str | int] | None):
    """The one tokenizer of hub models ``sources`` (each at its first revision), which then
    read the same token ids, so that their windows can be shared. An error if any source is
    not a hub id (ours read the pipeline's token files) or two tokenizers differ (vocabulary
    size or the ids of a probe text): such models are measured in separate sections."""
    ours = [s for s in sources if not is_hub_id(s)]
    if ours:
        hub = [s for s in sources if is_hub_id(s)]
        raise ValueError(
            f"one section mixes our runs {ours} with hub models {hub}: they read different "
            "token ids (the pipeline's tokenizer, their own); measure them in separate sections"
        )
    tokenizers = [hub_tokenizer(s, checkpoints_of(s, revisions)[0]) for s in sources]
    first = tokenizers[0]
    probe = first(_PROBE, add_special_tokens=False)["input_ids"]
    for source, tok in zip(sources[1:], tokenizers[1:], strict=True):
        ids = tok(_PROBE, add_special_tokens=False)["input_ids"]
        if len(tok) != len(first) or ids != probe:
            raise ValueError(
                f"{source} and {sources[0]} use different tokenizers ({len(tok)} and "
                f"{len(first)} ids); measure them in separate sections"
            )
    return first


def checkpoints_of(source: str, revisions: list[str | int] | None) -> list[str | int]:
    """Steps of one of our runs (all, ascending) or the given revisions of a hub model."""
    if is_run_dir(source):
        steps = available_steps(source)
        if not steps:
            raise ValueError(f"run {source} has no checkpoints")
        return list(steps)
    if not revisions:
        raise ValueError(f"{source} is not a run directory: give the hub revisions to measure")
    return list(revisions)


def training_mask_prob(source: str, default: float | None) -> float:
    """The masking probability the encoder was trained with: ``default`` if given, else the
    run's own (``run.json``; an unfinished run is an error), else BERT's 0.15 (hub models)."""
    if default is not None:
        return float(default)
    if is_run_dir(source):
        return float(read_run_info(source)["config"]["mask_prob"])
    return 0.15


#: one checkpoint label grammar: ours (``512``, ``"step-512"``), Pythia's (``"step512"``) and
#: OLMo's (``"step20000-tokens84B"``, ``"stage1-step928646-tokens3896B"``, with ``-seedN``)
_REVISION = re.compile(
    r"(?:stage\d+-)?(?:ingredient\d+-)?step-?(?P<step>\d+)"
    r"(?:-tokens\d+[KMBT]?)?(?:-seed\d+)?|(?P<bare>\d+)"
)
#: labels of a released model measured without a training step
RELEASED = ("main", "final")


def revision_step(revision: str | int) -> int:
    """The training step a checkpoint label names; ``-1`` for a released model's ``"main"`` or
    ``"final"``. Any other form is an error naming it: never a number guessed from its digits
    (OLMo's ``step20000-tokens84B`` is step 20000, not 2000084)."""
    if isinstance(revision, bool) or not isinstance(revision, numbers.Integral | str):
        raise TypeError(f"a revision is an int or a str, got {revision!r}")
    if isinstance(revision, numbers.Integral):  # numpy's integers too (a step read from a table)
        if revision < 0:
            raise ValueError(f"negative step {revision}")
        return int(revision)
    if revision in RELEASED:
        return -1
    m = _REVISION.fullmatch(revision)
    if not m:
        raise ValueError(
            f"unknown revision {revision!r}: expected a step (512, 'step-512'), Pythia's "
            "'stepN', OLMo's 'stepN-tokensMB' (optionally 'stageK-' before, '-seedS' after), "
            f"or one of {list(RELEASED)}"
        )
    return int(m.group("step") or m.group("bare"))
