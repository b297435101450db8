"""Answer metrics that need no judge model: the original's format check, the final answer of a
trajectory, exact match and ANLS. One implementation each; the reward and evaluation reports share them.

A *trajectory* is what the agent's model wrote, in one of two forms:

- a string in the Qwen chat format, as the original's reward sees it: the model's turns with the
  observations spliced in as ``<|im_start|>user … <|im_end|>`` spans. Those spans are not the model's
  words (they restate the instruction, which itself mentions ``<answer>`` and ``<search>``), so they
  are deleted before looking for tags; a user span left open at the end runs to the end of the text.
- a list of chat messages (``{"role", "content"}``, content a string or OpenAI parts): only the
  ``assistant`` turns count, their text joined with newlines.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

__all__ = [
    "Trajectory",
    "anls",
    "exact_match",
    "format_score",
    "last_answer",
    "levenshtein",
    "model_text",
    "normalize_answer",
]

Trajectory: TypeAlias = str | Sequence[Mapping[str, Any]]

_USER_SPAN = re.compile(r"<\|im_start\|>user.*?(?:<\|im_end\|>|\Z)", re.S)
_ANSWER = re.compile(r"<answer>.*</answer>", re.S)
_SEARCH = re.compile(r"<search>.*</search>", re.S)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def model_text(trajectory: Trajectory) -> str:
    """The model's own words: user spans deleted from a string, assistant turns of a message list."""
    if isinstance(trajectory, str):
        return _USER_SPAN.sub("", trajectory)
    return "\n".join(
        _message_text(msg.get("content")) for msg in trajectory if msg.get("role") == "assistant"
    )


def format_score(trajectory: Trajectory) -> float:
    """1.0 when the model's words hold both an ``<answer>…</answer>`` and a ``<search>…</search>``
    (the original's check: it rewards searching before answering), else 0.0."""
    text = model_text(trajectory)
    return 1.0 if _ANSWER.search(text) and _SEARCH.search(text) else 0.0


def last_answer(trajectory: Trajectory) -> str | None:
    """Text of the last ``<answer>…</answer>`` the model wrote, stripped; None when there is none.

    Like the original: the last ``</answer>`` and the last ``<answer>`` before it, so a model that
    answered twice is judged on its final answer."""
    text = model_text(trajectory)
    end = text.rfind("</answer>")
    if end < 0:
        return None
    start = text.rfind("<answer>", 0, end)
    if start < 0:
        return None
    return text[start + len("<answer>") : end].strip()


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower-case, punctuation and articles (a, an, the) removed, whitespace
    collapsed — so "The Eiffel Tower." and "eiffel tower" compare equal."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _references(references: str | Sequence[str]) -> list[str]:
    return [references] if isinstance(references, str) else list(references)


def exact_match(pred: str | None, reference: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised reference (any of several), else 0.0;
    no prediction scores 0."""
    if pred is None:
        return 0.0
    got = normalize_answer(pred)
    return 1.0 if any(got == normalize_answer(ref) for ref in _references(reference)) else 0.0


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions of one character each), two-row DP."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _anls_one(pred: str, ref: str, threshold: float) -> float:
    longest = max(len(pred), len(ref))
    if longest == 0:
        return 1.0
    if abs(len(pred) - len(ref)) / longest >= threshold:  # the distance is at least the length gap
        return 0.0
    nl = levenshtein(pred, ref) / longest
    return 1.0 - nl if nl < threshold else 0.0


def anls(pred: str | None, references: str | Sequence[str], threshold: float = 0.5) -> float:
    """Average Normalized Levenshtein Similarity of one prediction, as DocVQA scores it: with
    NL = distance / length of the longer string (after lower-casing and collapsing whitespace),
    ``1 − NL`` when NL < ``threshold``, else 0 — the best over the references. No prediction or no
    reference scores 0. Averaging over a dataset is the caller's (it is a plain mean)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], not {threshold}")
    refs = _references(references)
    if pred is None or not refs:
        return 0.0
    got = " ".join(pred.lower().split())
    return max(_anls_one(got, " ".join(ref.lower().split()), threshold) for ref in refs)
