"""Judge-free answer metrics against hand-computed values."""

from __future__ import annotations

import pytest

from vrag_desktop.core.eval.answers import (
    anls,
    exact_match,
    format_score,
    last_answer,
    levenshtein,
    model_text,
    normalize_answer,
)

pytestmark = pytest.mark.timeout(30)

USER = "\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n<|im_start|>assistant\n"


# ---- format ------------------------------------------------------------------------------------


def test_format_needs_both_answer_and_search_in_the_models_words() -> None:
    both = "<think>look</think><search>revenue 2023</search>" + USER + "<answer>42</answer>"
    assert format_score(both) == 1.0
    assert format_score("<think>x</think><answer>42</answer>") == 0.0  # no search
    assert format_score("<search>q</search>") == 0.0  # no answer
    assert format_score("") == 0.0


def test_format_tags_may_span_lines() -> None:
    assert format_score("<search>a\nb</search>\n<answer>line one\nline two</answer>") == 1.0


def test_format_ignores_tags_that_only_occur_inside_user_spans() -> None:
    # The invalid-action message restates the instruction, tags included: not the model's words.
    restated = (
        "<answer>42</answer>\n<|im_start|>user\nYour previous action is invalid. Use "
        "<search> query </search> or <answer> answer </answer>. Please try again.<|im_end|>\n"
    )
    assert format_score(restated) == 0.0
    only_user = "<|im_start|>user\n<search>x</search><answer>y</answer><|im_end|>\n<|im_start|>assistant\n"
    assert format_score(only_user) == 0.0
    # A user span left open at the end runs to the end of the text.
    assert format_score("<answer>1</answer><|im_start|>user\n<search>x</search>") == 0.0


def test_format_over_chat_messages_counts_assistant_turns_only() -> None:
    messages = [
        {"role": "system", "content": "Use <search> and <answer>."},
        {"role": "user", "content": [{"type": "text", "text": "<search>q</search>"}]},
        {"role": "assistant", "content": "<search>revenue</search>"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:..."}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<answer>42</answer>"}]},
    ]
    assert model_text(messages) == "<search>revenue</search>\n<answer>42</answer>"
    assert format_score(messages) == 1.0
    assert format_score(messages[:4]) == 0.0  # the only <answer> left would be nowhere


# ---- last answer -------------------------------------------------------------------------------


def test_last_answer_wins_and_is_stripped() -> None:
    text = "<answer> first </answer><search>more</search>" + USER + "<answer>\n  second \n</answer>"
    assert last_answer(text) == "second"


def test_last_answer_none_and_user_spans() -> None:
    assert last_answer("<search>q</search>") is None
    assert last_answer("<answer>open but never closed") is None
    assert last_answer("</answer> closed but never opened") is None
    # An <answer> inside a user span (the restated instruction) is not the model's answer.
    assert last_answer("<answer>7</answer><|im_start|>user\nuse <answer> x </answer><|im_end|>") == "7"
    assert last_answer([{"role": "assistant", "content": "<answer>a</answer> <answer>b</answer>"}]) == "b"


# ---- exact match -------------------------------------------------------------------------------


def test_normalize_answer_squad_style() -> None:
    assert normalize_answer("  The Eiffel-Tower, in  PARIS! ") == "eiffeltower in paris"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_exact_match() -> None:
    assert exact_match("The answer is 42.", "answer is 42") == 1.0
    assert exact_match("42 %", "42%") == 1.0  # "%" is punctuation: both "42"
    assert exact_match("4 2", "42") == 0.0  # whitespace inside a token still differs
    assert exact_match("Paris", ["London", "paris."]) == 1.0
    assert exact_match(None, "42") == 0.0
    assert exact_match("", "") == 1.0


# ---- ANLS --------------------------------------------------------------------------------------


def test_levenshtein() -> None:
    assert levenshtein("kitten", "sitting") == 3  # k->s, e->i, +g
    assert levenshtein("", "abc") == 3
    assert levenshtein("abc", "abc") == 0


def test_anls_values() -> None:
    assert anls("abcd", "abcd") == 1.0
    # distance 1 over length 4: NL = 0.25 < 0.5 -> 1 - 0.25 = 0.75
    assert anls("abcx", "abcd") == pytest.approx(0.75)
    # case and whitespace do not count: "Total  Revenue " == "total revenue"
    assert anls("Total  Revenue ", "total revenue") == 1.0
    # best over references: "abcd" vs "zzzz" -> NL 1 -> 0; vs "abce" -> NL 0.25 -> 0.75
    assert anls("abcd", ["zzzz", "abce"]) == pytest.approx(0.75)


def test_anls_threshold_edge() -> None:
    # distance 2 over length 4: NL = 0.5, not < 0.5 -> 0
    assert anls("abxy", "abcd") == 0.0
    # distance 2 over length 5: NL = 0.4 < 0.5 -> 0.6
    assert anls("abxye", "abcde") == pytest.approx(0.6)
    # with threshold 0.6 the first one counts: 1 - 0.5 = 0.5
    assert anls("abxy", "abcd", threshold=0.6) == pytest.approx(0.5)
    # length gap alone decides: "ab" vs "abcd" -> NL = 2/4 = 0.5 -> 0
    assert anls("ab", "abcd") == 0.0


def test_anls_degenerate() -> None:
    assert anls(None, "abc") == 0.0
    assert anls("abc", []) == 0.0
    assert anls("", "") == 1.0
    with pytest.raises(ValueError):
        anls("a", "a", threshold=0)
