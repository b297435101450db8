"""``vrag-desktop endpoints list|use``: the model endpoints a question can go to, and which one is the
current model — the same choice the app's Ask box, its status bar and its evaluations use (the
profile store's ``active`` in ``<data>/config/endpoints.json``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vrag_desktop.cli.common import EXIT_OK, CLIError, command_group


def add_parsers(sub: Any) -> None:
    ep = command_group(sub, "endpoints", help="model endpoints: list them, choose the current model")
    el = ep.add_parser("list", help="endpoint profiles, the current one marked, with whether it can answer")
    el.add_argument("--json", action="store_true")
    eu = ep.add_parser("use", help="make a profile the current model (the app's Ask box follows)")
    eu.add_argument("name")


def cmd_endpoints(args: argparse.Namespace) -> int:
    from vrag_desktop.core.endpoints.profiles import ProfileError, ProfileStore
    from vrag_desktop.core.endpoints.readiness import check
    from vrag_desktop.core.paths import DataLayout

    layout = DataLayout.resolve(args.data_dir)
    store = ProfileStore(layout.config)
    if args.endpoints_command == "use":
        try:
            store.set_active(store.get(args.name).name)
        except ProfileError as exc:
            raise CLIError(f"{exc} (profiles: {', '.join(store.names())})") from exc
        ready = check(store, layout.root)
        print(f"The current model is now '{args.name}'." + ("" if ready.ready else f" Note: {ready.reason}"))
        return EXIT_OK
    rows = []
    for p in store.profiles():
        ready = check(store, layout.root, p.name)
        rows.append(
            {
                "name": p.name,
                "current": p.name == store.active,
                "base_url": p.base_url,
                "model": p.model,
                "ready": ready.ready,
                "reason": ready.reason,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=True))
        return EXIT_OK
    if store.active is None:
        print("No model is chosen yet: vrag-desktop endpoints use NAME")
    for r in rows:
        mark = "*" if r["current"] else " "
        state = "ready" if r["ready"] else r["reason"]
        print(f"{mark} {r['name']:<16} {r['model'] or '-':<32} {r['base_url'] or '-'}  ({state})")
    return EXIT_OK


def readiness_hint(fix: str, name: str | None) -> str:
    """What to do on the command line about a :class:`~vrag_desktop.core.endpoints.readiness.Readiness`."""
    from vrag_desktop.core.endpoints.profiles import env_var_for

    if fix == "choose":
        return (
            "choose one with: vrag-desktop endpoints use NAME (see vrag-desktop endpoints list), "
            "or pass --base-url URL --model NAME"
        )
    if fix == "key":
        return f"set {env_var_for(name or '')} (or DASHSCOPE_API_KEY), or store the key in the app's Runtime panel"
    if fix == "server":
        return "start it with: vrag-desktop runtime start MODEL (or from the app's Runtime panel)"
    return "fix the profile in the app's Runtime panel, or pass --base-url URL --model NAME"
