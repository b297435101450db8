"""``vrag-desktop ask`` (stream an agent run to the terminal) and ``vrag-desktop runs`` (saved runs)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from vrag_desktop.cli.common import EXIT_ERROR, EXIT_OK, command_group
from vrag_desktop.core.agents.names import AGENT_HELP, AGENT_NAMES, agent_name

if TYPE_CHECKING:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.run.assemble import Endpoint
    from vrag_desktop.core.run.store import RunStore


def add_parsers(sub: Any) -> None:
    ask = sub.add_parser(
        "ask", help="answer a question from your corpora with an agent, streaming its reasoning"
    )
    ask.add_argument("question")
    ask.add_argument(
        "--agent", choices=list(AGENT_NAMES), default="vrag", help=f"{AGENT_HELP} (default: vrag)"
    )
    ask.add_argument(
        "--endpoint",
        metavar="PROFILE",
        help="endpoint profile (default: the active one; see 'vrag-desktop endpoints')",
    )
    ask.add_argument(
        "--base-url", help="an OpenAI-compatible server instead of a profile, e.g. http://127.0.0.1:8002/v1"
    )
    ask.add_argument("--model", help="served model name (with --base-url, or to override the profile's)")
    ask.add_argument(
        "--api-key-env",
        metavar="VAR",
        default="VRAG_DESKTOP_API_KEY",
        help="environment variable holding the key for --base-url (default: %(default)s)",
    )
    ask.add_argument("--corpus", action="append", help="corpus to search (repeatable; default: all)")
    ask.add_argument(
        "--search-url", help="use an HTTP search server (e.g. serve-search) instead of local corpora"
    )
    ask.add_argument("--max-steps", type=int, default=None)
    ask.add_argument("--top-k", type=int, default=None)
    ask.add_argument("--no-thinking", action="store_true", help="VimRAG: thinking mode off")
    ask.add_argument("--json", action="store_true", help="print every event as a JSON line")
    ask.add_argument("--no-save", action="store_true", help="do not keep this run")

    rs = command_group(sub, "runs", help="saved runs: list, show, export")
    rl = rs.add_parser("list", help="saved runs, newest first")
    rl.add_argument("--json", action="store_true")
    rsh = rs.add_parser("show", help="replay a run's events (id prefix, or 'last')")
    rsh.add_argument("run_id")
    rsh.add_argument("--json", action="store_true")
    rex = rs.add_parser(
        "export",
        help="export runs as training data: verl RL parquet or LLaMA-Factory SFT samples",
        description="Ground truth comes from --dataset (labels a person gave, or a benchmark), never "
        "from the agent's own answer: runs whose question the dataset does not label are refused.",
    )
    rex.add_argument("run_ids", nargs="*", help="id prefixes (default: all saved runs)")
    rex.add_argument(
        "--format",
        choices=["rl", "rl-jsonl", "sft"],
        required=True,
        help="rl: verl parquet; rl-jsonl: the same rows as JSON lines; sft: LLaMA-Factory messages+images",
    )
    rex.add_argument(
        "--dataset",
        required=True,
        metavar="FILE",
        help='labelled questions: the original\'s unified JSON ({"examples": [...]}) or JSON lines',
    )
    rex.add_argument(
        "--out", required=True, help="output file (.parquet for rl, .jsonl for rl-jsonl, .json for sft)"
    )
    rex.add_argument(
        "--skip-unlabelled", action="store_true", help="export the labelled runs, leave the others out"
    )
    rex.add_argument(
        "--data-source",
        default="rag",
        help="RL data_source: rag (default), slidevqa_test, mmlongdoc or vidoseek",
    )
    rex.add_argument("--split", default="train", help="RL extra_info.split (default: %(default)s)")


# ---------------------------------------------------------------- ask
def cmd_ask(args: argparse.Namespace) -> int:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.run.assemble import AgentOptions, SearchSource
    from vrag_desktop.core.run.session import RunSession, RunSpec

    if not args.question.strip():
        print("vrag-desktop: error: the question is empty", file=sys.stderr)
        return EXIT_ERROR
    layout = DataLayout.resolve(args.data_dir)
    if not args.base_url:  # a profile: say now what the app's Ask bar says, not after four failed tries
        from vrag_desktop.cli.endpoints import readiness_hint
        from vrag_desktop.core.endpoints.profiles import ProfileError, ProfileStore
        from vrag_desktop.core.endpoints.readiness import check

        try:
            ready = check(ProfileStore(layout.config), layout.root, args.endpoint)
        except ProfileError:
            ready = None  # an unknown profile: _endpoint below says which ones exist
        if ready is not None and not ready.ready:
            print(
                f"vrag-desktop: error: {ready.reason} To go on, {readiness_hint(ready.fix, ready.profile)}.",
                file=sys.stderr,
            )
            return EXIT_ERROR
    endpoint = _endpoint(args, layout)
    search = SearchSource(url=args.search_url, corpora=args.corpus, data_dir=layout.root)
    options = AgentOptions.for_agent(
        args.agent, max_steps=args.max_steps, top_k=args.top_k, enable_thinking=not args.no_thinking
    )
    session = RunSession(RunSpec(args.agent, endpoint, search, options, layout.root, save=not args.no_save))
    printer = EventPrinter(sys.stdout, as_json=args.json, color=sys.stdout.isatty())
    gen = session.run(args.question)
    try:
        for ev in gen:
            printer(ev)
    except KeyboardInterrupt:
        gen.close()
        print("\nStopped; the run is saved as cancelled.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ask … | head`: the run stops now and is saved as such; main exits quietly
        gen.close()
        raise
    return EXIT_OK if printer.answered else EXIT_ERROR


def _endpoint(args: argparse.Namespace, layout: DataLayout) -> Endpoint:
    """--base-url/--model (key from --api-key-env), or an endpoint profile (keys from keyring/env)."""
    from vrag_desktop.core.endpoints.profiles import ProfileStore
    from vrag_desktop.core.run.assemble import Endpoint

    if args.base_url:
        if not args.model:
            raise SystemExit("vrag-desktop: error: --base-url needs --model (the served model name)")
        return Endpoint.from_url(args.base_url, args.model, os.environ.get(args.api_key_env) or None)
    return Endpoint.from_profile(ProfileStore(layout.config), args.endpoint, args.model)


class EventPrinter:
    """Renders agent events for a terminal: thinking dimmed, actions on their own lines, the answer
    with the evidence it rests on."""

    def __init__(self, out: TextIO, *, as_json: bool = False, color: bool = False) -> None:
        self.out = out
        self.as_json = as_json
        self.color = color
        self.answered = False
        self._mode = ""

    def _style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _line(self, text: str = "") -> None:
        if self._mode:
            self.out.write("\n")
            self._mode = ""
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, ev: Any) -> None:
        kind = ev["event"]
        if self.as_json:
            self.out.write(json.dumps(ev.to_dict(), ensure_ascii=True, default=str) + "\n")
            self.out.flush()
            self.answered |= kind == "answer" and not ev["forced"]
            return
        if kind == "think":
            if self._mode != "think":
                self._line()
                self.out.write(self._style("💭 ", "2"))
                self._mode = "think"
            self.out.write(self._style(ev["content"], "2"))
            self.out.flush()
        elif kind == "search":
            self._line(self._style(f"🔍 search: {ev['content']}", "36"))
        elif kind == "search_results":
            for i, h in enumerate(ev["hits"]):
                mark = "→" if i in ev["shown"] else " "
                where = (
                    Path(h.source).name
                    + (f" p{h.page}" if h.page else "")
                    + (f" clip {h.clip}" if h.clip else "")
                )
                also = f"  ({h.also_in_text(paths=False)})" if h.also_in else ""
                self._line(f"   {mark} {h.score_text}  {where}{also}")
        elif kind == "bbox":
            self._line(self._style(f"📐 region: {ev['content']}", "35"))
        elif kind == "crop_image":
            x1, y1, x2, y2 = ev["region"]
            self._line(
                f"   ✂ crop {x2 - x1}×{y2 - y1} px at ({x1}, {y1}) of {Path(ev['source']).name}"
                + (f" p{ev['page']}" if ev["page"] else "")
            )
        elif kind == "memorize":
            self._line(self._style(f"💾 memory: {ev['content']}", "33"))
        elif kind == "error":
            self._line(self._style(f"⚠ {ev['content']}", "31"))
        elif kind == "max_steps":
            self._line(self._style(f"⏱ {ev['content']}", "31"))
        elif kind == "answer":
            self.answered = not ev["forced"]
            self._line()
            self._line(self._style("✅ Answer: ", "1;32") + ev["content"])
            for e in ev["evidence"]:
                where = Path(e.source).name + (f", page {e.page}" if e.page else "")
                if e.region:
                    where += f", region {list(e.region)}"
                self._line(f"   evidence: {where}")


# ---------------------------------------------------------------- runs
def cmd_runs(args: argparse.Namespace) -> int:
    from vrag_desktop.core.datasets import DatasetError
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.run.store import RunError, RunStore

    store = RunStore(DataLayout.resolve(args.data_dir).runs)
    try:
        if args.runs_command == "list":
            runs = store.list()
            if args.json:
                print(json.dumps([r.__dict__ for r in runs], indent=2, ensure_ascii=True, default=str))
            elif not runs:
                print('No saved runs yet. Ask something: vrag-desktop ask "your question"')
            for r in [] if args.json else runs:
                print(
                    f"{r.id}  {agent_name(r.agent):<6} {r.status:<11} {r.question[:60]!r} → {r.answer[:40]!r}"
                )
            return EXIT_OK
        if args.runs_command == "show":
            rid = store.resolve(args.run_id)
            printer = EventPrinter(sys.stdout, as_json=args.json, color=sys.stdout.isatty())
            s = store.summary(rid)
            if not args.json:
                print(f"Run {rid} ({agent_name(s.agent)}, {s.model or 'model?'}, {s.status}): {s.question}")
            for ev in store.events(rid):
                printer(ev)
            return EXIT_OK
        if args.runs_command == "export":
            return _export(store, args)
    except (RunError, DatasetError) as exc:
        print(f"vrag-desktop: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_ERROR


def _export(store: RunStore, args: argparse.Namespace) -> int:
    """Runs → training data, ground truth from the dataset; refusals name the runs."""
    from vrag_desktop.core.datasets import load_dataset
    from vrag_desktop.core.run.export import ExportRefused, export_runs

    ids = [store.resolve(p) for p in args.run_ids] if args.run_ids else [r.id for r in store.list()]
    if not ids:
        print(
            'vrag-desktop: error: no saved runs to export. Ask something: vrag-desktop ask "…"',
            file=sys.stderr,
        )
        return EXIT_ERROR
    dataset = load_dataset(args.dataset)
    out = Path(args.out)
    try:
        report = export_runs(
            store,
            args.format,
            ids,
            dataset,
            out,
            data_source=args.data_source,
            split=args.split,
            skip_unlabelled=args.skip_unlabelled,
        )
    except ExportRefused as exc:
        print(f"vrag-desktop: error: {exc} (--skip-unlabelled exports only those)", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"vrag-desktop: error: cannot write {out}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for line in report.lines():
        print(line)
    return EXIT_OK
