"""Write a tiny random Qwen2-VL chat model (a few MB) for trying the trainer on a CPU.

Why: docs/trainer.md's warm-start walk-through (SFT, then GRPO on the sample corpus's split) needs a
model a laptop trains in minutes, offline. This is the model the trainer's tests use
(``tests/tiny_vl_models.py``: hidden size 64, two layers, a tokenizer with Qwen's special tokens)
with the VRAG tags as single tokens, so a tiny policy can learn the protocol. Its weights are
random: it learns the protocol and the training questions, not to read pages.

    .venv/bin/python scripts/tiny_vl_model.py OUT [--vocabulary-from resources/sample_corpus]
        [--hidden 64] [--layers 2] [--seed 0]

``--vocabulary-from DIR`` also trains the tokenizer on the VRAG prompt and the text of DIR's
documents (PDF text layers, notes) and of its ``train.json`` questions, so their words are whole
tokens: sequences are several times shorter (faster on a CPU) and a question is a few tokens to
copy into a search. The validation questions are not read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The VRAG protocol's tags, each one token of the tiny tokenizer.
TAGS = ("<think>", "</think>", "<search>", "</search>", "<bbox>", "</bbox>", "<answer>", "</answer>")


def vocabulary(folder: Path) -> list[str]:
    """The texts the tokenizer learns words from: the VRAG prompt, the documents' text and the
    training questions and answers of ``folder`` (never ``val.json``)."""
    import json

    import pymupdf

    from vrag_desktop.core.agents.vrag_protocol import VRAG_PROMPT

    texts = [VRAG_PROMPT] * 20  # frequent: its words merge first
    for pdf in sorted(folder.rglob("*.pdf")):
        with pymupdf.open(pdf) as doc:
            texts += [page.get_text() for page in doc]
    texts += [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*")) if p.suffix in (".md", ".txt")]
    train = folder / "train.json"
    if train.is_file():
        for item in json.loads(train.read_text(encoding="utf-8")):
            texts += [str(item.get("question", "")), str(item.get("answer", ""))] * 5
    return texts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="the model folder to write (must not hold a model yet)")
    p.add_argument("--hidden", type=int, default=64, help="hidden size (default 64)")
    p.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocabulary-from", type=Path, metavar="DIR", help="learn whole words from DIR")
    p.add_argument("--vocab-size", type=int, default=3000, help="with --vocabulary-from (default 3000)")
    args = p.parse_args(argv)
    if (args.out / "config.json").exists():
        print(f"{args.out} already holds a model; choose another folder", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_vl_models import build_tiny_qwen2_vl

    texts = vocabulary(args.vocabulary_from) if args.vocabulary_from else []
    out = build_tiny_qwen2_vl(
        args.out,
        args.seed,
        with_lm_head=True,
        extra_tokens=TAGS,
        hidden=args.hidden,
        layers=args.layers,
        vocabulary=texts,
        vocab_size=args.vocab_size if texts else 400,
    )
    print(f"Tiny Qwen2-VL chat model written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
