"""VimRAG's tool calls: the tool names and a tolerant parser that validates each call's arguments.

Why a tolerant parser: models drift from the format (single quotes, trailing commas, a fenced block,
no tags at all). json5 accepts the JSON-ish variants; when nothing usable is found the error says
precisely what is wrong (no call, bad JSON at which position, unknown tool, which field is missing),
because that message is sent back to the model so it can correct itself. The prompts and schemas
that describe these calls to the model are in :mod:`.vimrag_prompts`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import json5

ADD_SEARCH_NODE = "add_search_node"
SUMMARIZE_AND_MEMORIZE = "summarize_and_memorize"
ADD_ANSWER_NODE = "add_answer_node"
TOOL_NAMES = (ADD_SEARCH_NODE, SUMMARIZE_AND_MEMORIZE, ADD_ANSWER_NODE)


# ---------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ToolCall:
    """A parsed, validated call. ``arguments`` are normalised (types coerced where unambiguous);
    ``notes`` list tolerated oddities (a second call ignored, a string given for a list, …)."""

    name: str
    arguments: dict[str, Any]
    notes: tuple[str, ...] = ()


class ToolCallError(ValueError):
    """No usable tool call. ``kind``: no_call | invalid_json | unknown_tool | missing_field | bad_field."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S | re.I)
_FENCE = re.compile(r"```(?:json5?|JSON5?)?\s*(\{.*?\})\s*```", re.S)
_EXAMPLE = (
    '<tool_call>{"name": "add_search_node", "arguments": {"id": "...", "parent_ids": ["root"], "query": "..."}}'
    "</tool_call>"
)


def _outside_think(text: str) -> tuple[str, str]:
    """(text outside <think> blocks, text inside). A bare ``</think>`` closes what came before it."""
    inside = " ".join(m.group(0) for m in _THINK.finditer(text))
    rest = _THINK.sub(" ", text)
    close = re.search(r"</think>", rest, re.I)
    if close:
        inside += " " + rest[: close.start()]
        rest = rest[close.end() :]
    return rest, inside


def _balanced_object(text: str, start: int) -> str:
    """The ``{…}`` starting at ``start`` (string-aware brace matching); the rest of the text if unclosed."""
    depth, quote, escaped = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]


def extract_call_text(text: str) -> tuple[str | None, list[str]]:
    """The JSON text of the first tool call: a ``<tool_call>`` block (the closing tag may be missing
    at the end), else a fenced block, else a bare JSON object; looks outside ``<think>`` first."""
    notes: list[str] = []
    rest, inside = _outside_think(text)
    for where in (rest, inside):
        blocks = _CALL.findall(where)
        if blocks:
            if len(blocks) > 1:
                notes.append(
                    f"the reply has {len(blocks)} tool calls; only the first is used: call exactly "
                    "one tool per turn"
                )
            body = blocks[0].strip()
            fenced = _FENCE.search(body)
            return (fenced.group(1) if fenced else body), notes
        fenced = _FENCE.search(where)
        if fenced:
            return fenced.group(1), notes
        brace = where.find("{")
        if brace >= 0 and re.search(r"[\"']name[\"']", where[brace:]):
            return _balanced_object(where, brace), notes
    return None, notes


def parse_tool_call(text: str) -> ToolCall:
    """Parse and validate the first tool call in a reply. Raises :class:`ToolCallError` with a
    message that tells the model what to fix."""
    raw, notes = extract_call_text(text or "")
    if raw is None or not raw.strip():
        raise ToolCallError(
            f"no tool call was found in the reply; call exactly one tool like {_EXAMPLE}", "no_call"
        )
    try:
        obj = json5.loads(raw)
    except ValueError as exc:
        snippet = raw if len(raw) <= 200 else raw[:200] + "…"
        raise ToolCallError(f"the tool call is not valid JSON ({exc}): {snippet}", "invalid_json") from None
    if not isinstance(obj, dict):
        raise ToolCallError(
            f'the tool call must be a JSON object {{"name": ..., "arguments": {{...}}}}, got '
            f"{type(obj).__name__}",
            "invalid_json",
        )
    if isinstance(obj.get("function"), dict):  # OpenAI-style {"function": {"name", "arguments"}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolCallError(
            f'the tool call has no "name"; use one of {", ".join(TOOL_NAMES)}', "missing_field"
        )
    name = name.strip()
    if name not in TOOL_NAMES:
        raise ToolCallError(f'unknown tool "{name}"; use one of {", ".join(TOOL_NAMES)}', "unknown_tool")
    args = obj.get("arguments", obj.get("parameters"))
    if isinstance(args, str):  # arguments serialised as a JSON string
        try:
            args = json5.loads(args)
        except ValueError as exc:
            raise ToolCallError(
                f"the arguments of {name} are not valid JSON ({exc})", "invalid_json"
            ) from None
    if args is None:
        raise ToolCallError(f'{name}: the tool call has no "arguments" object', "missing_field")
    if not isinstance(args, dict):
        raise ToolCallError(f'{name}: "arguments" must be an object', "bad_field")
    normalized = _VALIDATORS[name](args, notes)
    return ToolCall(name, normalized, tuple(notes))


# ---------------------------------------------------------------- argument validation


def _require(name: str, args: dict[str, Any], fields: tuple[str, ...], where: str = "") -> None:
    missing = [f for f in fields if f not in args]
    if missing:
        what = ", ".join(f'"{m}"' for m in missing)
        raise ToolCallError(
            f"{name}{where} is missing {what} (required: {', '.join(fields)})", "missing_field"
        )


def _string(name: str, field: str, value: Any, *, allow_empty: bool = False) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, list | dict):
        raise ToolCallError(f'{name}: "{field}" must be a string', "bad_field")
    text = str(value)
    if not allow_empty and not text.strip():
        raise ToolCallError(f'{name}: "{field}" must not be empty', "bad_field")
    return text


def _string_list(name: str, field: str, value: Any, notes: list[str]) -> list[str]:
    if isinstance(value, str):
        notes.append(f'"{field}" should be a list of strings; "{value}" was read as ["{value}"]')
        return [value]
    if not isinstance(value, list) or any(isinstance(v, list | dict) or v is None for v in value):
        raise ToolCallError(f'{name}: "{field}" must be a list of strings, e.g. ["root"]', "bad_field")
    return [str(v) for v in value]


def _bool(where: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    raise ToolCallError(f'{where}: "is_useful" must be true or false, got {json.dumps(value)}', "bad_field")


def _numbers(where: str, value: Any) -> list[float]:
    if value is None or value == "":
        return []
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise ToolCallError(
            f'{where}: "key_timestamp" must be a list of seconds, e.g. [12.0, 15.5]', "bad_field"
        )
    out = []
    for v in value:
        try:
            if isinstance(v, bool):
                raise ValueError
            out.append(float(str(v).strip().removesuffix("s").strip()) if isinstance(v, str) else float(v))
        except (TypeError, ValueError):
            raise ToolCallError(
                f'{where}: "key_timestamp" holds {json.dumps(v)}, which is not a number of seconds',
                "bad_field",
            ) from None
    return out


def _priority(where: str, value: Any, notes: list[str]) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        p = round(float(value))
    except (TypeError, ValueError):
        raise ToolCallError(
            f'{where}: "priority_score" must be an integer 1-5, got {json.dumps(value)}', "bad_field"
        ) from None
    if not 1 <= p <= 5:
        notes.append(f"{where}: priority_score {value} is outside 1-5 and was clamped")
        p = max(1, min(5, p))
    return p


def _v_search(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    n = ADD_SEARCH_NODE
    _require(n, args, ("id", "parent_ids", "query"))
    return {
        "id": _string(n, "id", args["id"]),
        "parent_ids": _string_list(n, "parent_ids", args["parent_ids"], notes),
        "query": _string(n, "query", args["query"]).strip(),
    }


def _v_memorize(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    n = SUMMARIZE_AND_MEMORIZE
    _require(n, args, ("summarize", "memorize"))
    summary = _string(n, "summarize", args["summarize"], allow_empty=True).strip()
    if not summary:
        raise ToolCallError(
            f'{n}: "summarize" must not be empty; write 1-3 sentences or "no relevant information was found"',
            "bad_field",
        )
    items = args["memorize"]
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise ToolCallError(f'{n}: "memorize" must be a list with one object per returned item', "bad_field")
    out = []
    for i, item in enumerate(items):
        where = f"{n}: memorize[{i}]"
        if not isinstance(item, dict):
            raise ToolCallError(
                f"{where} must be an object with information_id, is_useful, key_timestamp and priority_score",
                "bad_field",
            )
        _require(n, item, ("information_id", "is_useful", "priority_score"), f" memorize[{i}]")
        out.append(
            {
                "information_id": _string(where, "information_id", item["information_id"]).strip(),
                "is_useful": _bool(where, item["is_useful"]),
                "key_timestamp": _numbers(where, item.get("key_timestamp")),
                "priority_score": _priority(where, item["priority_score"], notes),
            }
        )
    return {"summarize": summary, "memorize": out}


def _v_answer(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    n = ADD_ANSWER_NODE
    _require(n, args, ("parent_ids", "answer"))
    return {
        "parent_ids": _string_list(n, "parent_ids", args["parent_ids"], notes),
        "answer": _string(n, "answer", args["answer"]).strip(),
    }


_VALIDATORS = {ADD_SEARCH_NODE: _v_search, SUMMARIZE_AND_MEMORIZE: _v_memorize, ADD_ANSWER_NODE: _v_answer}


__all__ = [
    "ADD_ANSWER_NODE",
    "ADD_SEARCH_NODE",
    "SUMMARIZE_AND_MEMORIZE",
    "TOOL_NAMES",
    "ToolCall",
    "ToolCallError",
    "extract_call_text",
    "parse_tool_call",
]
