"""VimRAG's prompts, tool schemas and a tolerant tool-call parser.

The upstream prompt text is not available; these are written from the reference's description
(§4.2) and say exactly what it says the model must do: build a DAG of the search (root / search /
answer nodes), one tool call per turn in the Hermes/Qwen convention (schemas inside
``<tools></tools>``, calls as ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``), a mandatory
``summarize_and_memorize`` after every ``add_search_node`` judging every returned item. The tool and
field names are the interface and are exact.

Why a tolerant parser: models drift from the format (single quotes, trailing commas, a fenced block,
no tags at all). json5 accepts the JSON-ish variants; when nothing usable is found the error says
precisely what is wrong (no call, bad JSON at which position, unknown tool, which field is missing),
because that message is sent back to the model so it can correct itself.
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

#: The reference's pixel budgets (§4.4): one picture, one video's frames together, and S_total, the
#: memory buffer the energy-selected items share. Kept here, a light module, so that the agent, the
#: energy, the run options and the Python API default to one value.
MAX_PIXELS_IMAGE = 1_003_520
MAX_PIXELS_VIDEO = 401_408
MEMORY_BUFFER_PIXELS = 2_007_040

# ---------------------------------------------------------------- tool schemas (field names exact)

ADD_SEARCH_NODE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ADD_SEARCH_NODE,
        "description": (
            "Add a search node to the Agent Action Graph and search the knowledge base with its query. "
            "You receive the retrieved information (Text n, Picture n, Video n) and must then call "
            "summarize_and_memorize."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "id": {
                    "type": "string",
                    "description": "Unique, short, descriptive title of this search step (a few words); "
                    "it is the node's id.",
                },
                "parent_ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": 'Ids of existing nodes this step builds on ("root" for a new line of '
                    "inquiry).",
                },
                "query": {
                    "type": "string",
                    "description": "The search query; it must differ substantially from previous queries.",
                },
            },
            "required": ["id", "parent_ids", "query"],
        },
    },
}

SUMMARIZE_AND_MEMORIZE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SUMMARIZE_AND_MEMORIZE,
        "description": (
            "Mandatory after every add_search_node: summarize the retrieved information and decide, for "
            "every returned item, whether to keep it in visual memory."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "summarize": {
                    "type": "string",
                    "description": "1-3 factual sentences of what the results say about the question, or "
                    'exactly "no relevant information was found".',
                },
                "memorize": {
                    "type": "array",
                    "description": "One entry for every returned item.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "information_id": {
                                "type": "string",
                                "description": 'The item\'s label as shown, e.g. "Text 1", "Picture 3", '
                                '"Video 1".',
                            },
                            "is_useful": {
                                "type": "boolean",
                                "description": "Whether the item helps answer the question.",
                            },
                            "key_timestamp": {
                                "type": "array",
                                "items": {"type": "number"},
                                "description": "Videos only: the seconds of the key frames to keep, taken "
                                "from the <t seconds> labels; [] for text and pictures.",
                            },
                            "priority_score": {
                                "type": "integer",
                                "description": "1-5; 5 = critical evidence, 1 = irrelevant.",
                            },
                        },
                        "required": ["information_id", "is_useful", "key_timestamp", "priority_score"],
                    },
                },
            },
            "required": ["summarize", "memorize"],
        },
    },
}

ADD_ANSWER_NODE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ADD_ANSWER_NODE,
        "description": "Add the answer node and finish: give the final answer to the question.",
        "parameters": {
            "type": "object",
            "properties": {
                "parent_ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Ids of the nodes whose information supports the answer.",
                },
                "answer": {"type": "string", "description": "The final answer, concise."},
            },
            "required": ["parent_ids", "answer"],
        },
    },
}

TOOLS: tuple[dict[str, Any], ...] = (
    ADD_SEARCH_NODE_SCHEMA,
    SUMMARIZE_AND_MEMORIZE_SCHEMA,
    ADD_ANSWER_NODE_SCHEMA,
)


def tools_block(schemas: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str:
    """Schemas inside ``<tools></tools>``, one JSON object per line (Hermes/Qwen convention)."""
    return "<tools>\n" + "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas) + "\n</tools>"


_CALL_FORMAT = (
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)

# ---------------------------------------------------------------- prompts

SYSTEM_PROMPT = (
    "You are a research agent. You answer the user's question by searching a multimodal knowledge base "
    "(document pages, pictures, video clips and texts), and you record your search process as a directed "
    "acyclic graph (DAG): the Agent Action Graph. At every step you are shown the question, the graph so far "
    "and the multimodal memory (pictures and video frames you chose to keep); this is your whole state.\n\n"
    "## Node types\n"
    '- root: the user\'s question. Its id is "root"; it already exists.\n'
    "- search: one search step. Its id is a unique, short, descriptive title of what the step looks for "
    '(a few words, e.g. "Edelweiss leaf hairs"); never reuse an id. Its parent_ids name the existing nodes '
    'it builds on ("root" for a new line of inquiry). Its query must differ substantially from every '
    "previous query in the graph.\n"
    "- answer: the final answer. It has no id; its parent_ids name the nodes whose information supports "
    "the answer.\n\n"
    "## Rules\n"
    "1. Add exactly one node per turn: call exactly one tool.\n"
    "2. After every add_search_node you receive the retrieved information, each item labelled Text n, "
    "Picture n or Video n (video frames are each preceded by their time, <t seconds>). Your next call must "
    "be summarize_and_memorize for that search, unless you can already answer.\n"
    "3. In summarize_and_memorize, list every returned item in memorize: information_id is its label; "
    "is_useful says whether it helps answer the question; key_timestamp lists, for a video, the seconds of "
    "the frames worth keeping, copied from the <t seconds> labels (use [] for texts and pictures); "
    "priority_score is 1-5 (5 = critical evidence). An irrelevant item gets is_useful false and "
    "priority_score 1. summarize is 1-3 factual, non-redundant sentences about what the results say on the "
    'question, or exactly "no relevant information was found". Texts are not kept as memory: put what '
    "they say into the summary.\n"
    "4. Do not call add_search_node again before summarize_and_memorize.\n"
    "5. parent_ids may only name nodes that exist in the Agent Action Graph.\n"
    "6. When the graph and the memory hold enough information, call add_answer_node with a concise answer.\n\n"
    "# Tools\n\n"
    "You may call one function per turn to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    + tools_block(TOOLS)
    + "\n\n"
    + _CALL_FORMAT
)

USER_PROMPT = "### Question\n{query}\n\n### Agent Action Graph\n{action_graph}"

MEMORY_HEADER = "### Multimodal Memory\nHistorical information for reference only.\n"

SUMMARY_PROMPT = (
    "Now summarize the retrieved information above for the search node you just added: write a brief, "
    "factual, non-redundant summary of what it says about the question, and judge every returned item "
    "(Text n, Picture n, Video n) with summarize_and_memorize. If you can already answer the question, "
    "call add_answer_node instead.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    + tools_block((SUMMARIZE_AND_MEMORIZE_SCHEMA, ADD_ANSWER_NODE_SCHEMA))
    + "\n\n"
    + _CALL_FORMAT
    + "\n\nNow, generate your response in the correct MCP format below:"
)

#: Sent as the last user message once the step budget is spent.
ANSWER_NOW_PROMPT = (
    "You have used all your steps. Do not search any more: call add_answer_node now with your best answer, "
    "based on the Agent Action Graph and the memory."
)

#: The answer when the model never answers (the original ended with no answer at all).
FALLBACK_ANSWER = "Sorry, I could not find the answer within the step limit."


def build_user_prompt(query: str, action_graph_json: str) -> str:
    """USER_PROMPT filled in (``str.format`` does not re-read the values, so braces in a question
    or the graph are kept verbatim)."""
    return USER_PROMPT.format(query=query, action_graph=action_graph_json)


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
    "ADD_ANSWER_NODE_SCHEMA",
    "ADD_SEARCH_NODE",
    "ADD_SEARCH_NODE_SCHEMA",
    "ANSWER_NOW_PROMPT",
    "FALLBACK_ANSWER",
    "MAX_PIXELS_IMAGE",
    "MAX_PIXELS_VIDEO",
    "MEMORY_BUFFER_PIXELS",
    "MEMORY_HEADER",
    "SUMMARIZE_AND_MEMORIZE",
    "SUMMARIZE_AND_MEMORIZE_SCHEMA",
    "SUMMARY_PROMPT",
    "SYSTEM_PROMPT",
    "TOOLS",
    "TOOL_NAMES",
    "USER_PROMPT",
    "ToolCall",
    "ToolCallError",
    "build_user_prompt",
    "extract_call_text",
    "parse_tool_call",
    "tools_block",
]
