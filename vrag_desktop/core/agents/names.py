"""What a person reads for each agent: one name and one description, the same in the command line's
output, the app and the reports. Run files, evaluation settings and command-line values keep the
ids (``vrag``, ``vimrag``): they are data, and the original's names for the two demos."""

from __future__ import annotations

__all__ = ["AGENT_CHOICES", "AGENT_HELP", "AGENT_NAMES", "agent_choice", "agent_name"]

AGENT_NAMES = {"vrag": "VRAG", "vimrag": "VimRAG"}
_ROLES = {"vrag": "search, crop and zoom", "vimrag": "multimodal memory graph"}


def agent_name(kind: object) -> str:
    """``VRAG`` / ``VimRAG`` for an agent id; an unknown id as it is (a newer app's run)."""
    return AGENT_NAMES.get(str(kind), str(kind))


def agent_choice(kind: str) -> str:
    """The agent as a choice in a list: its name and what it does (``VRAG — search, crop and zoom``)."""
    role = _ROLES.get(kind)
    return f"{agent_name(kind)} — {role}" if role else agent_name(kind)


#: (id, choice text) of every agent, in the order lists offer them.
AGENT_CHOICES = tuple((kind, agent_choice(kind)) for kind in AGENT_NAMES)
#: The command line's help for ``--agent``: which id is which agent.
AGENT_HELP = "; ".join(f"{kind}: {choice}" for kind, choice in AGENT_CHOICES)
