"""``vrag-desktop models``: list the catalogue and what is downloaded (with "fits this machine"),
pull a model with a progress bar (Ctrl-C stops, the same command resumes), remove one, add a
local folder, and the hub settings (mirror, token, offline). Parsing and printing only: the work is
:mod:`vrag_desktop.core.models`.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import TYPE_CHECKING, Any

from vrag_desktop.cli.common import EXIT_INTERRUPTED, EXIT_OK, CLIError, command_group, err

if TYPE_CHECKING:
    from vrag_desktop.core.models import DownloadProgress, ModelRow
    from vrag_desktop.core.paths import DataLayout


def add_parsers(sub: Any) -> None:
    actions = command_group(
        sub,
        "models",
        help="answer models and embedders: list (with what fits this machine), pull, rm",
        description="The built-in catalogue and the models folder (<data>/models). Downloads resume, "
        "are checked against the hub's checksums and respect offline mode.",
    )
    ls = actions.add_parser("list", help="the catalogue and the downloaded models, with size and fit")
    ls.add_argument("--json", action="store_true", help="one JSON list on stdout")
    ls.add_argument("--kind", choices=("answer", "embedder", "reranker"), help="only this kind")
    pl = actions.add_parser("pull", help="download a model (Ctrl-C stops; the same command resumes)")
    pl.add_argument(
        "id", metavar="ID", help="a Hugging Face model id (owner/name), or a local model folder to add"
    )
    pl.add_argument("--revision", metavar="R", help="branch, tag or commit (default: main)")
    pl.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    rm = actions.add_parser("rm", help="delete a downloaded model (or forget an added folder)")
    rm.add_argument("id", metavar="ID", help="the model id, or the added folder's path")
    add = actions.add_parser("add", help="list a local model folder (checked; never copied or deleted)")
    add.add_argument("path", metavar="PATH")
    st = actions.add_parser("settings", help="show or change the hub endpoint, the token and offline mode")
    ep = st.add_mutually_exclusive_group()
    ep.add_argument("--endpoint", metavar="URL", help="a Hugging Face mirror, e.g. https://hf-mirror.com")
    ep.add_argument("--default-endpoint", action="store_true", help="back to $HF_ENDPOINT or huggingface.co")
    off = st.add_mutually_exclusive_group()
    off.add_argument("--offline", action="store_true", help="never touch the network")
    off.add_argument("--online", action="store_true", help="allow downloads again")
    tok = st.add_mutually_exclusive_group()
    tok.add_argument(
        "--token-stdin", action="store_true", help="read a Hugging Face token from stdin (keyring)"
    )
    tok.add_argument("--forget-token", action="store_true", help="remove the saved token")
    rr = st.add_mutually_exclusive_group()
    rr.add_argument(
        "--reranker",
        metavar="ID",
        help="rerank every search's top candidates with this downloaded cross-encoder (or model folder): "
        "search, serve-search, eval and the agents alike; off by default",
    )
    rr.add_argument("--no-reranker", action="store_true", help="search without a reranker (the default)")


def cmd_models(args: argparse.Namespace) -> int:
    from vrag_desktop.core.models import ModelError
    from vrag_desktop.core.paths import DataLayout

    layout = DataLayout.resolve(args.data_dir)
    action = args.models_command
    try:
        if action == "list":
            return _list(layout, args)
        if action == "pull":
            return _pull(layout, args)
        if action == "rm":
            return _rm(layout, args.id)
        if action == "add":
            return _add(layout, args.path)
        return _settings(layout, args)
    except ModelError as exc:
        raise CLIError(str(exc)) from None


# ---------------------------------------------------------------- list


def _list(layout: DataLayout, args: argparse.Namespace) -> int:
    from vrag_desktop.core.models import human_bytes, list_models, load_settings, probe_machine

    machine = probe_machine(layout.models)
    rows = [r for r in list_models(layout, machine) if not args.kind or r.kind == args.kind]
    if args.json:
        print(json.dumps([r.as_json() for r in rows], indent=2))
        return EXIT_OK
    settings = load_settings(layout)
    gpus = machine.gpus.summary().replace("\n", "; ")
    print(f"This machine: {gpus}; {machine.ram_total / 1024**3:.1f} GiB RAM; "
          f"{human_bytes(machine.disk_free)} free at {layout.models}")  # fmt: skip
    offline = settings.offline_reason()
    print(f"Hub: {settings.effective_endpoint}" + (f" — {offline}" if offline else ""))
    titles = {"answer": "Answer models", "embedder": "Embedders", "reranker": "Rerankers", "unknown": "Other"}
    for kind, title in titles.items():
        chosen = [r for r in rows if r.kind == kind]
        if chosen:
            print(f"\n{title}:")
            for row in chosen:
                _print_row(row)
    return EXIT_OK


def _print_row(row: ModelRow) -> None:
    from vrag_desktop.core.models import human_bytes

    if row.state in ("downloaded", "builtin", "local", "missing"):
        size = f"{human_bytes(row.size_on_disk)} on disk"
    elif row.state == "partial" and row.partial is not None:
        size = f"{human_bytes(row.partial.have_bytes)} of {human_bytes(row.partial.total_bytes)}"
    else:
        size = ("~" if row.approximate else "") + human_bytes(row.download_bytes)
    state = {"partial": "paused", "available": "-"}.get(row.state, row.state)
    star = "*" if row.entry is not None and row.entry.recommended else " "
    print(f" {star}{row.id:<44} {state:<10} {size:<22} {row.fit.verdict.value}")
    detail = row.problem or "; ".join(row.fit.reasons)
    if detail:
        print(f"    {detail}")


# ---------------------------------------------------------------- pull


def _pull(layout: DataLayout, args: argparse.Namespace) -> int:
    from pathlib import Path

    from vrag_desktop.core.models import find_entry, fits, human_bytes, inspect_remote, probe_machine, pull
    from vrag_desktop.core.progress import CancelToken

    if Path(args.id).expanduser().is_dir():
        return _add(layout, args.id)
    entry = find_entry(args.id)
    if entry is not None and entry.builtin:
        err(f"{entry.id} ships with the app: there is nothing to download.")
        return EXIT_OK
    remote, entry = inspect_remote(layout, args.id, args.revision)
    fit = fits(entry, probe_machine(layout.models))
    err(f"{remote.repo_id} @ {remote.revision} ({remote.commit[:12]}): {human_bytes(remote.total_bytes)} in "
        f"{len(remote.files)} file(s); {fit.summary}", args.quiet)  # fmt: skip
    cancel = CancelToken()
    view = _PullView(args.quiet)
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.cancel())
    gen = pull(layout, remote.repo_id, args.revision, cancel=cancel, remote=remote)
    try:
        while True:
            try:
                view.show(next(gen))
            except StopIteration as stop:
                result = stop.value
                break
    finally:
        gen.close()
        view.close()
        signal.signal(signal.SIGINT, previous)
    if result.cancelled:
        kept = human_bytes(result.kept_bytes + result.downloaded_bytes)
        err(f"Interrupted: {kept} kept. Run the same command again to resume.")
        return EXIT_INTERRUPTED
    if result.up_to_date:
        err(
            f"{result.repo_id} is already downloaded and up to date ({result.model.path if result.model else ''})"
        )
    elif result.model is not None:
        err(f"{result.repo_id} is ready: {result.model.path} ({human_bytes(result.model.size_bytes)}, "
            f"every file checked)")  # fmt: skip
    if result.model is not None:
        print(result.model.path)
    return EXIT_OK


class _PullView:
    """A tqdm bar over the model's bytes; the current file in its postfix."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None

    def show(self, p: DownloadProgress) -> None:
        if self.quiet:
            return
        if p.phase in ("resolve", "wait"):
            err(p.message)
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=p.total, initial=p.done, unit="B", unit_scale=True, unit_divisor=1000,
                            dynamic_ncols=True, file=sys.stderr)  # fmt: skip
        self.bar.update(p.done - self.bar.n)
        name = p.file[-40:]
        self.bar.set_postfix_str(f"{'checking ' if p.phase == 'verify' else ''}{name}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# ---------------------------------------------------------------- rm, add, settings


def _rm(layout: DataLayout, spec: str) -> int:
    from vrag_desktop.core.models import ModelStore, human_bytes

    what, freed = ModelStore(layout).remove(spec)
    err(what[0].upper() + what[1:] + (f" ({human_bytes(freed)} freed)" if freed else ""))
    return EXIT_OK


def _add(layout: DataLayout, path: str) -> int:
    from vrag_desktop.core.models import ModelStore, fits, human_bytes, probe_machine

    model, entry = ModelStore(layout).add_local(path)
    fit = fits(entry, probe_machine(layout.models), downloaded=True)
    err(f"Added {model.path}: a {entry.kind} model, {human_bytes(model.size_bytes)}; {fit.summary}")
    return EXIT_OK


def _settings(layout: DataLayout, args: argparse.Namespace) -> int:
    from vrag_desktop.core.models import forget_token, load_settings, set_token, stored_token, update_settings
    from vrag_desktop.core.models.settings import check_endpoint

    changes: dict[str, Any] = {}
    if args.endpoint:
        changes["endpoint"] = check_endpoint(args.endpoint)
    if args.default_endpoint:
        changes["endpoint"] = None
    if args.offline or args.online:
        changes["offline"] = bool(args.offline)
    if changes:
        update_settings(layout, **changes)
    if args.token_stdin:
        token = sys.stdin.readline().strip()
        if not token:
            raise CLIError("no token on stdin")
        where = set_token(layout, token)
        err(f"Token saved ({where}).")
    if args.forget_token:
        forget_token(layout)
        err("Token forgotten.")
    reranker = _set_reranker(layout, args)
    s = load_settings(layout)
    _, source = stored_token(layout)
    print(f"endpoint: {s.effective_endpoint}" + ("" if s.endpoint else " (default)"))
    reason = s.offline_reason()
    print(f"offline:  {'on (' + reason + ')' if reason else 'off'}")
    print(f"token:    {source or 'none saved (hf auth login is used if present)'}")
    print(f"reranker: {reranker}")
    if s.local_folders:
        print("local folders:\n" + "\n".join(f"  {f}" for f in s.local_folders))
    return EXIT_OK


def _set_reranker(layout: DataLayout, args: argparse.Namespace) -> str:
    """Save ``--reranker`` / ``--no-reranker`` (a reranker must load now: checked, not hoped for);
    returns the setting in words."""
    from dataclasses import replace

    from vrag_desktop.core.search.rerank import CrossEncoder, RerankError, model_folder
    from vrag_desktop.core.search.settings import load_search_settings, save_search_settings

    current = load_search_settings(layout.root)
    if args.reranker is not None or args.no_reranker:
        spec = (args.reranker or "").strip() or None
        if spec is not None:
            try:
                CrossEncoder(model_folder(spec, layout.root))
            except RerankError as exc:
                raise CLIError(str(exc)) from None
        current = replace(current, reranker=spec, problem=None)
        save_search_settings(layout.root, current)
    if current.problem:
        return f"off ({current.problem})"
    if current.reranker:
        return f"{current.reranker} (top {current.rerank_top})"
    return "off (default)"
