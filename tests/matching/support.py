"""Helpers for the matching tests: tiny real models built on the spot, and real VSR samples.

The models are real sentence-transformers / transformers objects (random weights, a vocabulary
written here), so the code paths are the production ones without downloading anything.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from matching.params import Balance
from matching.records import Record, load_vsr_jsonl, stratified_sample
from vsr_core.relations import all_relations

VSR_VALIDATED = (
    Path(__file__).resolve().parents[2].parent
    / "shared/vsr/data/data_files/all_vsr_validated_data.jsonl"
)
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _vocab(extra: list[str]) -> list[str]:
    words = {"the", "is", "."}
    for r in all_relations(include_import_only=True):
        words.update(r.name.split())
    for w in extra:
        words.update(w.split())
    return SPECIAL + sorted(words)


def _write_tokenizer(path: Path, words: list[str]) -> None:
    from transformers import BertTokenizer

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizer(str(path / "vocab.txt")).save_pretrained(str(path))


def _tiny_config(n_words: int, **kw: Any) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=n_words,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        **kw,
    )


def build_tiny_encoder(path: Path, concepts: list[str]) -> Path:
    """A SentenceTransformer (1-layer BERT, mean pooling) saved at ``path``."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertModel

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    words = _vocab(concepts)
    hf = path / "hf"
    _write_tokenizer(hf, words)
    BertModel(_tiny_config(len(words))).save_pretrained(str(hf))
    tr = Transformer(str(hf))
    model = SentenceTransformer(modules=[tr, Pooling(tr.get_embedding_dimension(), "mean")])
    model.save(str(path / "st"))
    return path / "st"


def build_tiny_nli(path: Path, concepts: list[str], labels: tuple[str, ...] | None = None) -> Path:
    """A CrossEncoder-loadable sequence classifier with NLI labels, saved at ``path``."""
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    labels = labels or ("contradiction", "entailment", "neutral")
    words = _vocab(concepts)
    _write_tokenizer(path, words)
    cfg = _tiny_config(
        len(words),
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={n: i for i, n in enumerate(labels)},
    )
    BertForSequenceClassification(cfg).save_pretrained(str(path))
    return path


@lru_cache(maxsize=1)
def vsr_validated() -> tuple[Record, ...]:
    return tuple(load_vsr_jsonl(VSR_VALIDATED))


def vsr_sample(per_relation: int, seed: int = 0) -> list[Record]:
    """A stratified sample of the real validated VSR file (every relation represented)."""
    return stratified_sample(list(vsr_validated()), per_relation, seed)


def concepts_of(records: list[Record]) -> list[str]:
    return sorted({r.subj for r in records} | {r.obj for r in records})


# The matchings tests/matching/test_adversaries.py checks and bench/match_quality.py prints:
# VCR's weights (balance "off") on split seed 0, then the default on split seeds 0-3.
ADVERSARY_RUNS = (
    (Balance.OFF, 0),
    (Balance.SOFT, 0),
    (Balance.SOFT, 1),
    (Balance.SOFT, 2),
    (Balance.SOFT, 3),
)


def run_on_export_split(relevance: Any, params: Any, split_seed: int = 0, fit: bool = True) -> Any:
    """`run_matching` on the real validated release as `vsr match` runs it by default: the
    export's random split (annotation groups: the two halves of a caption share one part)."""
    from matching.pipeline import run_matching
    from matching.similarity import TableSimilarity
    from vsr_dataset.splits import SplitItem, random_split

    records = list(vsr_validated())
    items = [SplitItem(r.id, r.caption, r.subj, r.obj) for r in records if r.kept()]
    mapping = {k: p for p, ks in random_split(items, split_seed).items() for k in ks}
    return run_matching(records, relevance, TableSimilarity(), params, splits=mapping, fit=fit)
