"""``vrag-desktop update-check``: ask the release feed a person set whether a newer version is out.

It reads one URL (the app's ``update_url`` setting, or ``--url``) and downloads nothing; there is
no built-in feed (core/update_check.py says why). The exit status tells a script what it found.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from vrag_desktop.cli.common import EXIT_ERROR, EXIT_OK

#: A newer version is out: something to report, not a failure.
EXIT_NEWER = 10
#: No check was made: no feed is set, or offline mode is on.
EXIT_NOT_CHECKED = 2

NO_URL_HELP = (
    "no update feed is set, so nothing was checked (there is no built-in one): set its address in "
    "the app (Settings → Updates) or give it with --url URL"
)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "update-check",
        help="ask the update feed you set whether a newer version is out (reads one URL, downloads nothing)",
        description="Read the update feed (the app's update_url setting, or --url) and compare its newest "
        "version with this one. Exit status: 0 up to date, 10 a newer version is out, 1 the check "
        "failed, 2 no check was made (no feed set, or offline mode on).",
    )
    p.add_argument(
        "--url", metavar="URL", help="the feed to read this time (https; http only to this machine)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def cmd_update_check(args: argparse.Namespace) -> int:
    from vrag_desktop.core import update_check
    from vrag_desktop.core.settings import saved_update_url

    url = args.url if args.url is not None else saved_update_url()
    result = update_check.check(url, data_dir=args.data_dir)
    if not url.strip():
        result = update_check.UpdateResult(update_check.OFF, result.current, message=NO_URL_HELP)
    code = {
        update_check.NEWER: EXIT_NEWER,
        update_check.CURRENT: EXIT_OK,
        update_check.OFF: EXIT_NOT_CHECKED,
    }.get(result.status, EXIT_ERROR)
    if args.json:
        print(json.dumps(asdict(result), indent=2, ensure_ascii=False))
    elif result.status == update_check.NEWER:
        print(f"{result.message}.")
        if result.url:
            print(f"Release page: {result.url}")
        if result.notes:
            print(f"\n{result.notes}")
    elif result.status == update_check.CURRENT:
        print(f"{result.message}.")
    else:
        print(f"vrag-desktop: {'error' if code == EXIT_ERROR else 'note'}: {result.message}", file=sys.stderr)
    return code
