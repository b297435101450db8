"""The toy training task the app's and the trainer's tests share: two small PDFs, two questions,
and the VRAG tags as single tokens of the tiny tokenizer (so a tiny policy can learn them)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.rundir import TrainRun

TAGS = ("<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<bbox>", "</bbox>")


def vimrag_call_tokens() -> tuple[str, ...]:
    """The VimRAG teacher's calls (``vrag_trainer.sft_data.vimrag_teacher``, one search item to
    memorise) cut at their values (the question, the answer): the fixed JSON between them, each a
    single token for a tiny test model. Why: a 64-wide model learns a call's tokens on average but
    not their order, and one misplaced key breaks the JSON (docs/trainer.md); with these a call is
    its fixed piece, the copied question or answer, and a closing piece (~10 tokens), as short and
    regular as VRAG's tags, so a test's warm start writes calls the agent can parse."""
    from vrag_trainer.sft_data import vimrag_teacher

    reply = vimrag_teacher("@Q@", "@A@")
    calls = [reply("", 1), reply("<tool_response>\nPicture 1: a page", 2), reply("", 3)]
    pieces = [p for call in calls for p in re.split("@Q@|@A@", call) if p]
    return tuple(dict.fromkeys(pieces))


DOCS = {
    "alpha.pdf": [
        "The revenue of Alpha Corp in 2023 was 42 million dollars.",
        "Alpha Corp employs 300 people.",
    ],
    "beta.pdf": ["Beta Inc sells red bicycles.", "The Beta headquarters are in Oslo."],
}

EXAMPLES = [
    {
        "uid": "q1",
        "query": "What was the revenue of Alpha Corp in 2023?",
        "reference_answer": "42 million dollars",
        "meta_info": {"file_name": "alpha.pdf", "reference_page": [1]},
    },
    {
        "uid": "q2",
        "query": "Where are the Beta headquarters?",
        "reference_answer": "Oslo",
        "meta_info": {"file_name": "beta.pdf", "reference_page": [2]},
    },
]


#: Tokens of the tiny tokenizer (tests/tiny_vl_models.py) once it has learnt :func:`vocabulary`: it
#: stops at one token per word of those texts (about 1,230), below this.
VOCAB_SIZE = 2000


def vocabulary() -> list[str]:
    """What a tiny tokenizer learns whole words from: both agents' prompts (VRAG's; VimRAG's system
    prompt with its tool schemas, its summary and answer-now turns) and the toy task's pages,
    questions and answers. With them VimRAG's system prompt is ~1.2k tokens instead of ~3.7k and
    VRAG's ~160 instead of ~460, so a rollout's sequences are ~3x shorter and each forward and
    backward pass of a trainer test costs a fraction; the task's words as whole tokens make its
    replies short and easy to learn (``<answer>42 million dollars</answer>``: 5 tokens)."""
    from vrag_desktop.core.agents import vimrag_prompts as vimrag
    from vrag_desktop.core.agents import vrag_protocol as vrag

    prompts = [
        vrag.VRAG_PROMPT,
        vrag.invalid_action_message(""),
        vrag.ANSWER_NOW,
        vrag.FALLBACK_ANSWER,
        vimrag.SYSTEM_PROMPT,
        vimrag.USER_PROMPT,
        vimrag.MEMORY_HEADER,
        vimrag.SUMMARY_PROMPT,
        vimrag.ANSWER_NOW_PROMPT,
        vimrag.FALLBACK_ANSWER,
    ]
    task = [e[k] for e in EXAMPLES for k in ("query", "reference_answer")]
    return [*prompts, *(text for pages in DOCS.values() for text in pages), *task]


def build_toy_data(base: Path) -> Path:
    """Under ``base``: ``data/`` with corpus ``toy`` (the two small PDFs of :data:`DOCS`) indexed
    with MiniLM, and ``dataset.json`` (:data:`EXAMPLES`). Returns the data directory. Shared by the
    trainer's tests and the app's vLLM-rollout tests."""
    import pymupdf

    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.embedders.minilm import MiniLMEmbedder

    docs = base / "docs"
    docs.mkdir()
    for name, pages in DOCS.items():
        doc = pymupdf.open()
        for text in pages:
            page = doc.new_page(width=300, height=200)
            page.insert_textbox(pymupdf.Rect(20, 20, 280, 180), text, fontsize=14)
        doc.save(str(docs / name))
        doc.close()
    data = base / "data"
    corpus = Library(data).open("toy", create=True)
    corpus.add_paths([docs])
    for gen in (corpus.scan(), corpus.build(MiniLMEmbedder(device="cpu"))):
        for _ in gen:
            pass
    (base / "dataset.json").write_text(json.dumps({"examples": EXAMPLES}), encoding="utf-8")
    return data


def make_export(root: Path) -> Path:
    """A run directory whose ``export/`` looks like a served model (config and weights file)."""
    export = TrainRun(root).export_dir
    export.mkdir(parents=True)
    (export / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}), encoding="utf-8")
    (export / "model.safetensors").write_bytes(b"\0" * 16)
    return export


def toy_run(**fields: Any) -> dict[str, Any]:
    """A training config for the toy task: two prompts × two rollouts a step, a checkpoint every
    step, exact-match judging; ``fields`` add the model, data and lengths (and override)."""
    return {
        "corpora": ("toy",),
        "group_size": 2,
        "prompts_per_step": 2,
        "save_steps": 1,
        "learning_rate": 5e-3,
        "warmup_steps": 0,
        "judge": {"kind": "exact"},
        "samples_per_step": 2,
        "micro_batch_rows": 2,
        **fields,
    }
