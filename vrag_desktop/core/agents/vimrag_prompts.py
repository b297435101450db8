"""VimRAG's prompts and tool schemas (the tool-call parser is :mod:`.vimrag_calls`).

The upstream prompt text is not available; these are written from the reference's description
(§4.2) and say exactly what it says the model must do: build a DAG of the search (root / search /
answer nodes), one tool call per turn in the Hermes/Qwen convention (schemas inside
``<tools></tools>``, calls as ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``), a mandatory
``summarize_and_memorize`` after every ``add_search_node`` judging every returned item. The tool and
field names are the interface and are exact.
"""

from __future__ import annotations

import json
from typing import Any

from vrag_desktop.core.agents.vimrag_calls import (
    ADD_ANSWER_NODE,
    ADD_SEARCH_NODE,
    SUMMARIZE_AND_MEMORIZE,
    TOOL_NAMES,
    ToolCall,
    ToolCallError,
    extract_call_text,
    parse_tool_call,
)

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
