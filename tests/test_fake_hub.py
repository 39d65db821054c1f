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

from geolib.data.hub_corpus import prepare_hub_corpus
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

# hub models read the corpus text in their own tokenizer, never the pipeline's token ids; runs
# that share a tokenizer share a group, the others get their own
from geolib.models.checkpoints import hub_tokenizer, shared_tokenizer, shared_vocab_size
from geolib.models.token_groups import token_groups

corpus = Path(sys.argv[1])
kw = {"tokens": "nope.npy", "unigram_tokens": "nope.npy",
      "text": str(corpus / "id" / "validation.jsonl"),
      "unigram_text": str(corpus / "id" / "train.jsonl"), "max_text_tokens": 400}
runs = ["EleutherAI/pythia-160m", "google-bert/bert-base-uncased", "EleutherAI/pythia-410m"]
revisions = [["EleutherAI/pythia-160m", ["step0"]], ["EleutherAI/pythia-410m", ["step4"]],
             ["google-bert/bert-base-uncased", ["main"]]]
groups = token_groups(runs, revisions, **kw)
out["groups"] = [[list(g.runs), g.tokenizer, int(g.tokens.size), int(g.unigram.size)]
                 for g in groups]
first = json.loads((corpus / "id" / "validation.jsonl").read_text().splitlines()[0])["text"]
tok = hub_tokenizer("EleutherAI/pythia-160m", "step0")
tokens = groups[0].tokens
out["decoded"] = tok.decode(tokens[:50].tolist()) == first[: len(tok.decode(tokens[:50].tolist()))]
out["in_vocab"] = [int(g.tokens.max()) < len(hub_tokenizer(g.runs[0], "main")) for g in groups]
# BERT's extra specials shift no byte's id: the same text, the same ids, another tokenizer
out["same_ids"] = bool((groups[0].tokens == groups[1].tokens).all())
errors = {}
for name, call in {
    "vocab": lambda: shared_vocab_size(["EleutherAI/pythia-70m"], ["step0"]),
    "mixed": lambda: shared_tokenizer(["EleutherAI/pythia-70m", str(corpus)], ["step0"]),
    "no_text": lambda: token_groups(["EleutherAI/pythia-70m"], ["step0"], **{**kw, "text": None}),
    "no_pair": lambda: token_groups(["EleutherAI/pythia-70m"], revisions, **kw),
    "missing": lambda: token_groups(["EleutherAI/pythia-160m"], ["step3"], **kw),
}.items():
    try:
        call()
        errors[name] = "no error"
    except Exception as exc:
        errors[name] = f"{type(exc).__name__}: {exc}"
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
    assert out["groups"] == [
        [["EleutherAI/pythia-160m", "EleutherAI/pythia-410m"], "EleutherAI/pythia-160m", 400, 400],
        [["google-bert/bert-base-uncased"], "google-bert/bert-base-uncased", 400, 400],
    ]
    assert out["decoded"] is True and out["in_vocab"] == [True, True] and out["same_ids"]
    assert "own tokenizer" in out["errors"]["vocab"]
    assert "mixes our runs" in out["errors"]["mixed"]
    assert "set `text`" in out["errors"]["no_text"]
    assert "EleutherAI/pythia-70m: no revisions given" in out["errors"]["no_pair"]
    assert out["errors"]["missing"].startswith("MissingCheckpointError")


def test_the_fake_hub_holds_every_checkpoint_the_paper_profile_measures():
    """The rehearsal runs the paper profile's Paper A sections against the fake hub: every hub
    run and revision they name must be there, under the same name (else the rehearsal would
    rehearse another list)."""
    import importlib.util

    from geolib.config import apply_profiles, load_params
    from geolib.models.token_groups import revisions_of

    spec = importlib.util.spec_from_file_location("fake_hub", ROOT / "scripts" / "fake_hub.py")
    fake_hub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake_hub)
    paper = apply_profiles(load_params(ROOT / "params.yaml"), ROOT / "profiles" / "paper.yaml")
    named = 0
    for section in ("gradient_energy", "residual_isotropy"):
        p = paper[section]
        for run in p["runs"]:
            assert run in fake_hub.MODELS, run
            revisions = revisions_of(run, p["revisions"])
            assert revisions and set(revisions) <= set(fake_hub.MODELS[run][1]), run
            named += len(revisions)
    assert named >= 60  # two sections x (15 + 15 + 1)
