"""The toy training task the app's and the trainer's tests share: two small PDFs, two questions,
and the VRAG tags as single tokens of the tiny tokenizer (so a tiny policy can learn them)."""

from __future__ import annotations

TAGS = ("<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<bbox>", "</bbox>")

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
