"""A tiny random BERT cross-encoder in the sentence-transformers ``CrossEncoder`` layout
(``BertForSequenceClassification`` with one label, a WordPiece tokenizer), built from a config and
saved with ``save_pretrained``: the real architecture and files, no model hub."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def vocabulary(texts: Iterable[str]) -> list[str]:
    """Special tokens, the texts' lower-cased words and punctuation, and every letter and digit
    alone and as a ``##`` piece, so any English text tokenises without [UNK]."""
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    chars = [*"abcdefghijklmnopqrstuvwxyz0123456789", *".,:;!?%'-()"]
    out = list(SPECIALS)
    for token in [*chars, *(f"##{c}" for c in chars), *words]:
        if token not in out:
            out.append(token)
    return out


def make_cross_encoder(
    folder: Path,
    texts: Iterable[str] = (),
    *,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    **config: Any,
) -> Path:
    """Save a random cross-encoder whose tokenizer knows ``texts``' words into ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    vocab = {t: i for i, t in enumerate(vocabulary(texts))}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    fast = BertTokenizerFast(tokenizer_object=tok, model_max_length=512)
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=hidden * 2,
        max_position_embeddings=512,
        type_vocab_size=2,
        num_labels=1,
        initializer_range=0.3,  # scores far apart: the order is the model's, not float noise
        **config,
    )
    BertForSequenceClassification(cfg).eval().save_pretrained(folder)
    return folder
