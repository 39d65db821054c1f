"""An offline Hugging Face cache that stands in for the hub: the rehearsal's models and corpora.

    python scripts/fake_hub.py OUT_DIR        # then, for the rehearsal:
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
           HF_HUB_CACHE=OUT_DIR/hub HF_DATASETS_CACHE=OUT_DIR/datasets

It holds, under the real names, what the paper profile asks the hub for:

- tiny random GPT-NeoX models as ``EleutherAI/pythia-70m`` at revisions ``step0``, ``step1``,
  ``step2``, ``step4``, ``step1000``, and as ``EleutherAI/pythia-160m`` and ``-410m`` at the
  revisions the paper profile's Paper A sections measure (:data:`PYTHIA_REVISIONS`); tiny OLMo-2
  models as ``allenai/OLMo-2-0425-1B`` at ``stage1-stepN-tokensMB`` revisions; a tiny BERT as
  ``google-bert/bert-base-uncased``. Each revision is a real ref (``refs/<revision>`` → a
  snapshot), so ``from_pretrained(name, revision=…)`` resolves it offline exactly as online.
  Their tokenizers are byte-level and *not* ours: a stage that fed a hub model our token ids
  would fail, not pass unnoticed. Pythia's has 259 ids; OLMo's and BERT's add specials of their
  own (260 and 261 ids), so that a section holding all three has three token groups, as at paper
  scale.
- the hub corpus: ``NeelNanda/pile-10k`` (split ``train``) and ``allenai/paloma`` subsets
  ``c4_en``, ``wikitext_103``, ``m2d2_s2orc_unsplit`` (splits ``val``, ``test``), a few hundred
  documents each, as a hub-layout dataset repository *and* as the prepared Arrow cache a first
  online ``load_dataset`` leaves behind: offline, ``datasets`` reads only the latter.

Deterministic (seeded); ~10 s and a few MB.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

#: the Pythia revisions profiles/paper.yaml measures (a test checks they are the same)
PYTHIA_REVISIONS = [f"step{n}" for n in (0, *(2**i for i in range(10)), 1000, 4000, 16000, 143000)]
#: name → (family, revisions, extra special tokens): the models the profiles and tests measure
MODELS = {
    "EleutherAI/pythia-70m": ("pythia", ["step0", "step1", "step2", "step4", "step1000"], ()),
    "EleutherAI/pythia-160m": ("pythia", PYTHIA_REVISIONS, ()),
    "EleutherAI/pythia-410m": ("pythia", PYTHIA_REVISIONS, ()),
    "allenai/OLMo-2-0425-1B": (
        "olmo",
        ["stage1-step0-tokens0B", "stage1-step1000-tokens5B", "stage1-step2000-tokens9B"],
        ("<|olmo|>",),
    ),
    "google-bert/bert-base-uncased": ("bert", ["main"], ("[CLS]", "[SEP]")),
}
PILE = "NeelNanda/pile-10k"
PALOMA = "allenai/paloma"
PALOMA_SUBSETS = ("c4_en", "wikitext_103", "m2d2_s2orc_unsplit")
#: specials of the hub models' tokenizer (ids 256, 257, 258 after the 256 bytes)
SPECIALS = ("<|endoftext|>", "<|padding|>", "[MASK]")
WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at "
    "which but have an they you were their one all we can her has there been if more when will "
    "would who so no model language data layer train token weight state space rank energy"
).split()


# ----------------------------------------------------------------------------- the cache layout


def write_repo(
    cache: str | Path, repo_id: str, revisions: dict[str, Path], kind: str = "model"
) -> dict[str, str]:
    """Lay out ``revisions`` (name → a folder of files, subfolders allowed) as the Hugging Face
    cache does: ``<kind>s--org--name/{blobs/<sha256>, snapshots/<commit>/<path> → blob,
    refs/<revision>}``; ``main`` points at the last revision unless one is named ``main``.
    Returns revision → commit."""
    repo = Path(cache) / f"{kind}s--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    commits = {}
    for rev, src in revisions.items():
        commit = hashlib.sha1(f"{repo_id}@{rev}".encode()).hexdigest()
        snapshot = repo / "snapshots" / commit
        for f in sorted(p for p in Path(src).rglob("*") if p.is_file()):
            data = f.read_bytes()
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.write_bytes(data)
            link = snapshot / f.relative_to(src)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
        (repo / "refs" / rev).write_text(commit)
        commits[rev] = commit
    if "main" not in commits:
        (repo / "refs" / "main").write_text(commits[list(revisions)[-1]])
    return commits


# ----------------------------------------------------------------------------- models


def byte_tokenizer(folder: Path, extra: tuple[str, ...] = ()):
    """A byte-level tokenizer (256 bytes, then the specials and ``extra``: 259 ids and one more
    per extra), saved in ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab |= {tok: 256 + i for i, tok in enumerate(SPECIALS + extra)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIALS + extra))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=SPECIALS[0],
        bos_token=SPECIALS[0],
        pad_token=SPECIALS[1],
        mask_token=SPECIALS[2],
    )
    fast.save_pretrained(folder)
    return fast


def tiny_model(family: str, vocab_size: int, seed: int):
    """A random 16-wide, 2-block model of ``family`` (our families' transformers classes)."""
    from geolib.models.families import ModelConfig, SpecialTokens, build_model, quiet_progress

    d_ff = 24 if family == "olmo" else 32
    cfg = ModelConfig(family=family, d_model=16, n_layers=2, n_heads=2, d_ff=d_ff, context=64)
    with quiet_progress():
        special = SpecialTokens(pad=257, bos=256, eos=256)
        return build_model(cfg, vocab_size, special=special, seed=seed)


def build_models(cache: Path) -> dict[str, dict[str, str]]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r, (repo_id, (family, revisions, extra)) in enumerate(MODELS.items()):
            folders = {}
            for i, rev in enumerate(revisions):
                folder = Path(tmp) / repo_id.replace("/", "--") / rev
                tok = byte_tokenizer(folder, extra)
                tiny_model(family, len(tok), seed=1000 * r + i).save_pretrained(folder)
                folders[rev] = folder
            out[repo_id] = write_repo(cache, repo_id, folders)
    return out


# ----------------------------------------------------------------------------- corpora


def documents(source: str, n: int, seed: int) -> list[dict]:
    """``n`` seeded documents of English-like words (60–240 words each)."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(60, 240)))
        text = " ".join(words).capitalize() + "."
        docs.append({"text": text, "id": f"{source}-{i}", "meta": {"source": source}})
    return docs


def build_datasets(hub: Path, datasets_cache: Path, n_docs: int = 300) -> None:
    """The hub corpus as hub-layout dataset repositories, then prepared into ``datasets``'s
    Arrow cache by its own packaged builders (what an online first load leaves behind)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets.packaged_modules.json.json import Json
    from datasets.packaged_modules.parquet.parquet import Parquet

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "pile"
        (src / "data").mkdir(parents=True)
        rows = [{"text": d["text"], "meta": d["meta"]} for d in documents("pile", n_docs, 1)]
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf)
        (src / "data" / "train-00000-of-00001.parquet").write_bytes(buf.getvalue())
        pile_commit = write_repo(hub, PILE, {"main": src}, kind="dataset")["main"]
        src = Path(tmp) / "paloma"
        for s, subset in enumerate(PALOMA_SUBSETS):
            for split in ("val", "test"):
                folder = src / subset / split
                folder.mkdir(parents=True)
                docs = documents(f"{subset}-{split}", n_docs, 10 + 2 * s + (split == "test"))
                text = "".join(json.dumps(d) + "\n" for d in docs)
                (folder / f"{split}_{subset}.jsonl").write_text(text)
        paloma_commit = write_repo(hub, PALOMA, {"main": src}, kind="dataset")["main"]

    def prepare(builder_cls, repo_id: str, config: str, files: dict, commit: str) -> None:
        ns, name = repo_id.split("/")
        with tempfile.TemporaryDirectory(dir=datasets_cache) as work:
            builder = builder_cls(
                cache_dir=work, dataset_name=name, config_name=config, hash=commit, data_files=files
            )
            builder.download_and_prepare()
            target = datasets_cache / f"{ns}___{name}" / config / "0.0.0" / commit
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(builder.cache_dir, target)
        info = json.loads((target / "dataset_info.json").read_text())
        info["config_name"] = config  # the offline reader matches the folder by it
        (target / "dataset_info.json").write_text(json.dumps(info))

    datasets_cache.mkdir(parents=True, exist_ok=True)
    snap = hub / f"datasets--{PILE.replace('/', '--')}" / "snapshots" / pile_commit
    prepare(
        Parquet,
        PILE,
        "default",
        {"train": [str(p) for p in (snap / "data").glob("*")]},
        pile_commit,
    )
    snap = hub / f"datasets--{PALOMA.replace('/', '--')}" / "snapshots" / paloma_commit
    for subset in PALOMA_SUBSETS:
        files = {
            split: [str(p) for p in (snap / subset / split).glob("*")] for split in ("val", "test")
        }
        prepare(Json, PALOMA, subset, files, paloma_commit)


def environment(out: str | Path) -> dict[str, str]:
    """The variables that point the hub and ``datasets`` libraries at the fake cache, offline."""
    out = Path(out).resolve()
    return {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_CACHE": str(out / "hub"),
        "HF_DATASETS_CACHE": str(out / "datasets"),
    }


def build(out: str | Path, n_docs: int = 300) -> dict[str, str]:
    """Build the fake hub in ``out`` (emptied first); return :func:`environment`."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    build_models(out / "hub")
    build_datasets(out / "hub", out / "datasets", n_docs)
    return environment(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to build the cache in (emptied first)")
    parser.add_argument("--docs", type=int, default=300, help="documents per corpus split")
    args = parser.parse_args(argv)
    env = build(args.out, args.docs)
    print("\n".join(f"export {k}={v}" for k, v in env.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
