"""The paper-scale corpus from a model hub: Pile-10k in distribution, Paloma out of distribution.

Written in the layout and datasheet schema of :func:`geolib.data.corpus.prepare_corpus`, so every
later stage reads it as it reads the registries' corpus. Needs 🤗 ``datasets`` and a reachable hub
(never used by the default profile; rehearsed offline against ``scripts/fake_hub.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from geolib.data.acquire import slug
from geolib.data.corpus import (
    Document,
    assign_splits,
    check_fractions,
    write_datasheet,
    write_splits,
)


def hub_domain(subset: str) -> str:
    """The corpus domain a hub OOD subset becomes: ``"c4_en"`` → ``"ood_c4_en"`` (its files
    ``data/corpus/<domain>/test.jsonl``, ``data/tokens/<domain>/test.npy``)."""
    return f"ood_{slug(subset).replace('-', '_')}"


def prepare_hub_corpus(
    *,
    out_dir: str | Path = "data/corpus",
    id_dataset: str = "NeelNanda/pile-10k",
    ood_dataset: str = "allenai/paloma",
    ood_subsets: Sequence[str] = ("c4_en", "wikitext_103", "m2d2_s2orc_unsplit"),
    ood_split: str = "test",
    fractions: Mapping[str, float] | None = None,
    max_docs: int | None = None,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The paper-scale corpus via 🤗 ``datasets`` (needs a reachable hub; never used by default).

    Writes the same layout and the same datasheet schema as :func:`prepare_corpus`: Pile-10k
    split by hash into train/validation/test as domain ``id``; each Paloma subset as
    ``ood_<subset>/test.jsonl`` (Paloma is gated: accept its terms and log in first). A hub
    dataset is one source; its documents are its works, and its ``sha256`` is that of the
    documents' text as written (the hub's own files stay in Hugging Face's cache).
    """
    import datasets  # lazily: an optional dependency, absent from the default environment

    out_dir = Path(out_dir)
    fractions = check_fractions(fractions or {"train": 0.9, "validation": 0.05, "test": 0.05})
    sheet_sources: list[dict[str, Any]] = []
    sheet_domains: dict[str, Any] = {}

    def add(domain: str, role: str, name: str, data: Any, splits: Mapping[str, Any]) -> None:
        docs = [d for part in splits.values() for d in part]
        digest = hashlib.sha256()
        for d in docs:
            digest.update(d.text.encode() + b"\0")
        info = getattr(data, "info", None)
        text_bytes = sum(len(d.text.encode()) for d in docs)
        sheet_sources.append(
            {
                "name": slug(name),
                "domain": domain,
                "title": name,
                "registry": "huggingface-hub",
                "client": "datasets",
                "package": name.split(":")[0],
                "version": str(getattr(info, "version", None) or getattr(data, "_fingerprint", "")),
                "artifact": name,
                "artifact_bytes": int(getattr(info, "dataset_size", None) or text_bytes),
                "sha256": digest.hexdigest(),
                "licence": str(getattr(info, "license", None) or "see the dataset card"),
                "origin": f"{name} on the Hugging Face hub",
                "works": len(docs),
                "documents": len(docs),
                "text_bytes": text_bytes,
            }
        )
        sheet_domains[domain] = {
            "role": role,
            "description": f"{name} from the Hugging Face hub.",
            "sources": [slug(name)],
            "text_bytes_before_cap": text_bytes,
            "max_bytes": None,
            "splits": write_splits(out_dir / domain, splits, domain),
        }
        log(f"{domain}: {len(docs)} documents, {text_bytes / 1e6:.2f} MB text")

    def rows(dataset: Iterable[Mapping[str, Any]], prefix: str) -> list[Document]:
        docs = []
        for i, row in enumerate(dataset):
            if max_docs is not None and i >= max_docs:
                break
            doc_id = f"{prefix}/{row.get('id', i)}"
            docs.append(Document(doc_id, prefix.split("/")[0], str(row["text"])))
        return docs

    pile = datasets.load_dataset(id_dataset, split="train")
    id_docs = rows(pile, f"{slug(id_dataset.split('/')[-1])}/doc")
    add("id", "in-distribution", id_dataset, pile, assign_splits(id_docs, fractions, seed))
    for subset in ood_subsets:
        data = datasets.load_dataset(ood_dataset, subset, split=ood_split)
        docs = rows(data, f"{slug(subset)}/doc")
        add(
            hub_domain(subset),
            "out-of-distribution",
            f"{ood_dataset}:{subset}",
            data,
            {"test": docs},
        )
    sheet = {
        "title": "hub corpus",
        "generated_by": "python -m geolib.data.prepare prepare (data.source: hub)",
        "seed": seed,
        "split_unit": "document",
        "segmentation": None,
        "sources": sheet_sources,
        "domains": sheet_domains,
    }
    write_datasheet(sheet, out_dir)
    return sheet
