"""``vrag-desktop cache show|clear``: the kept page views (core/agents/page_views.py).

Why a command: the cache lives outside the data directory, in the user's cache folder, so a person
cannot otherwise see what it holds or empty it without the app. Views are made again when needed.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from vrag_desktop.cli.common import EXIT_OK, CLIError, command_group


def add_parsers(sub: Any) -> None:
    actions = command_group(sub, "cache", help="the kept page views: where, how many, the cap; clear them")
    show = actions.add_parser("show", help="where page views are kept, their number and size, the cap")
    show.add_argument("--json", action="store_true", help="print it as JSON")
    actions.add_parser("clear", help="remove every kept page view (made again when a page is shown)")


def cmd_cache(args: argparse.Namespace) -> int:
    from vrag_desktop.core.agents import page_views as pv

    root = pv.cache_dir()
    if args.cache_command == "clear":
        if root is None:
            print(f"Page views are not kept ({pv.CACHE_ENV}=off): nothing to clear.")
            return EXIT_OK
        freed = pv.clear()
        left, _ = pv.usage()
        print(f"Removed {pv.size_text(freed)} of page views from {root}.")
        if left:
            raise CLIError(f"{left} kept page views in {root} could not be removed (permissions?)")
        return EXIT_OK
    try:
        cap = pv.cap_bytes()
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    files, size = pv.usage()
    source = pv.LIMIT_ENV if os.environ.get(pv.LIMIT_ENV, "").strip() else "the app's setting"
    if args.json:
        info = {"folder": str(root) if root else None, "files": files, "bytes": size, "cap_bytes": cap}
        print(json.dumps(info, indent=2))
    elif root is None:
        print(f"Page views are not kept ({pv.CACHE_ENV}=off).")
    else:
        print(f"Page views: {root}\nKept: {files} page{'s' if files != 1 else ''}, {pv.size_text(size)}")
        print(f"Cap: {cap // pv.MB} MB ({source})" + ("; no views are kept" if cap == 0 else ""))
    return EXIT_OK
