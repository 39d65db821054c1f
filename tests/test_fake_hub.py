"""scripts/fake_hub.py: the offline stand-in for the hub resolves as the hub does, through the
libraries' own offline paths and through geolib's loaders (in a child process, since the
libraries read their offline settings when first imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHECK = r"""
import json, sys
from pathlib import Path

import torch
from datasets import load_dataset

from geolib.data.corpus import prepare_hub_corpus
from geolib.models.checkpoints import available_revisions, load, revision_step

out = {}
a, tok = load("EleutherAI/pythia-70m", "step0")
b, _ = load("EleutherAI/pythia-70m", 1000)  # an int N means "stepN"
moved = not torch.equal(a.get_output_embeddings().weight, b.get_output_embeddings().weight)
out["pythia"] = [type(a).__name__, len(tok), moved]
out["pythia_revisions"] = available_revisions("EleutherAI/pythia-70m")
revs = [r for r in available_revisions("allenai/OLMo-2-0425-1B") if r != "main"]
out["olmo_steps"] = [revision_step(r) for r in revs]
out["olmo"] = type(load("allenai/OLMo-2-0425-1B", revs[-1])[0]).__name__
out["bert"] = type(load("google-bert/bert-base-uncased", "main")[0]).__name__
try:
    load("EleutherAI/pythia-70m", "step2000")
    out["missing"] = "loaded"
except Exception as exc:
    out["missing"] = type(exc).__name__
pile = load_dataset("NeelNanda/pile-10k", split="train")
out["pile"] = [len(pile), sorted(pile.column_names)]
out["paloma"] = {
    s: len(load_dataset("allenai/paloma", s, split="test"))
    for s in ("c4_en", "wikitext_103", "m2d2_s2orc_unsplit")
}
sheet = prepare_hub_corpus(out_dir=sys.argv[1], max_docs=None, log=lambda *_: None)
out["corpus"] = sorted(p.name for p in Path(sys.argv[1]).iterdir() if p.is_dir())

# hub models read the corpus text in their own tokenizer, never the pipeline's token ids
from geolib.experiments.gradient_energy import stage_tokens
from geolib.models.checkpoints import hub_tokenizer, shared_tokenizer, shared_vocab_size

corpus = Path(sys.argv[1])
p = {"runs": ["EleutherAI/pythia-70m", "allenai/OLMo-2-0425-1B"],
     "revisions": ["step0"], "tokens": "nope.npy",
     "unigram_tokens": "nope.npy", "text": str(corpus / "id" / "validation.jsonl"),
     "unigram_text": str(corpus / "id" / "train.jsonl"), "max_text_tokens": 400}
tokens, unigram = stage_tokens({**p, "runs": ["EleutherAI/pythia-70m"]})
first = json.loads((corpus / "id" / "validation.jsonl").read_text().splitlines()[0])["text"]
tok = hub_tokenizer("EleutherAI/pythia-70m", "step0")
out["decoded"] = tok.decode(tokens[:50].tolist()) == first[: len(tok.decode(tokens[:50].tolist()))]
out["sizes"] = [int(tokens.size), int(unigram.size), int(tokens.max()) < len(tok)]
errors = {}
for name, call in {
    "vocab": lambda: shared_vocab_size(["EleutherAI/pythia-70m"], ["step0"]),
    "mixed": lambda: shared_tokenizer(["EleutherAI/pythia-70m", str(corpus)], ["step0"]),
    "no_text": lambda: stage_tokens({**p, "runs": ["EleutherAI/pythia-70m"], "text": None}),
}.items():
    try:
        call()
        errors[name] = "no error"
    except ValueError as exc:
        errors[name] = str(exc)
out["errors"] = errors
print(json.dumps(out))
"""


def test_the_fake_hub_resolves_offline_as_the_hub_does(tmp_path):
    cache = tmp_path / "fake"
    built = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fake_hub.py"), str(cache), "--docs", "24"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    env = dict(os.environ)
    for line in built.stdout.splitlines():  # the exports it prints
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    assert env["HF_HUB_OFFLINE"] == "1" and Path(env["HF_HUB_CACHE"]).is_dir()
    env.pop("HF_HOME", None)
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_path / "corpus")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["pythia"] == ["GPTNeoXForCausalLM", 259, True]  # revisions differ; not our vocab
    assert out["pythia_revisions"] == ["main", "step0", "step1", "step2", "step4", "step1000"]
    assert out["olmo_steps"] == [0, 1000, 2000]  # OLMo's names read as steps, not glued digits
    assert out["olmo"] == "Olmo2ForCausalLM" and out["bert"] == "BertForMaskedLM"
    assert out["missing"] == "MissingCheckpointError"
    assert out["pile"] == [24, ["meta", "text"]]
    assert out["paloma"] == {"c4_en": 24, "wikitext_103": 24, "m2d2_s2orc_unsplit": 24}
    assert out["corpus"] == ["id", "ood_c4_en", "ood_m2d2_s2orc_unsplit", "ood_wikitext_103"]
    assert out["decoded"] is True and out["sizes"] == [400, 400, True]
    assert "own tokenizer" in out["errors"]["vocab"]
    assert "mixes our runs" in out["errors"]["mixed"]
    assert "set `text` and `unigram_text`" in out["errors"]["no_text"]
