"""``vrag-desktop eval``: measure retrieval (and answers) on a labelled dataset.

An evaluation lives in a folder (default ``<data>/evaluations/<kind>-<dataset>-<corpora>``): run
the same command again after Ctrl-C, a crash or ``kill -9`` and it resumes, never redoing an item.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.cli.common import EXIT_INTERRUPTED, EXIT_OK, CLIError, command_group, err, library
from vrag_desktop.cli.search import add_mode_options
from vrag_desktop.core.agents.names import AGENT_HELP, AGENT_NAMES
from vrag_desktop.core.eval.metrics import REWARD_NDCG

if TYPE_CHECKING:
    from vrag_desktop.core.eval.jobs import EvalJob


def add_parsers(sub: Any) -> None:
    es = command_group(
        sub,
        "eval",
        metavar="KIND",
        help="evaluate retrieval or answers on a labelled dataset",
    )
    r = es.add_parser(
        "retrieval", help="search each question; recall@k, hit@k, MRR and NDCG per item and overall"
    )
    r.add_argument(
        "--dataset",
        required=True,
        metavar="FILE",
        help="unified dataset JSON (the original's), JSON lines, or the sample corpus's questions.json",
    )
    r.add_argument("--corpus", action="append", help="corpus to search (repeatable; default: all)")
    r.add_argument(
        "-k", type=int, action="append", dest="ks", metavar="K", help="cut-off (repeatable; default 1 3 5 10)"
    )
    add_mode_options(r)
    r.add_argument("--device", default=None)
    r.add_argument("--out", metavar="DIR", help="evaluation folder (default: under <data>/evaluations)")
    r.add_argument("--restart", action="store_true", help="delete the folder's earlier results first")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    r.add_argument("-q", "--quiet", action="store_true")

    a = es.add_parser(
        "answers",
        help="ask each question to an agent; judge its answer, score format, NDCG and the reward",
        description="Every run is kept in History (its run id is in the results). A judge profile "
        "that refuses its key or does not serve the model stops the evaluation at once (every item "
        "would fail); other judge failures and agent errors are recorded per item and it goes on.",
    )
    a.add_argument("--dataset", required=True, metavar="FILE", help="labelled questions (as for retrieval)")
    a.add_argument("--corpus", action="append", help="corpus to search (repeatable; default: all)")
    a.add_argument("--agent", choices=list(AGENT_NAMES), required=True, help=AGENT_HELP)
    a.add_argument("--profile", required=True, metavar="NAME", help="endpoint profile of the agent's model")
    a.add_argument("--model", help="served model name (overrides the profile's)")
    a.add_argument(
        "--judge",
        choices=["model", "exact", "anls"],
        default="model",
        help="model: a judge model (default); exact / anls: no judge, exact match or ANLS",
    )
    a.add_argument(
        "--judge-profile", metavar="NAME", help="endpoint profile of the judge (default: --profile)"
    )
    a.add_argument("--judge-model", metavar="M", help="the judge's served model name")
    a.add_argument("--max-steps", type=int, default=None)
    a.add_argument("--device", default=None)
    a.add_argument("--out", metavar="DIR", help="evaluation folder (default: under <data>/evaluations)")
    a.add_argument("--restart", action="store_true", help="delete the folder's earlier results first")
    a.add_argument("--json", action="store_true", help="print the summary as JSON")
    a.add_argument("-q", "--quiet", action="store_true")


def cmd_eval(args: argparse.Namespace) -> int:
    """``eval retrieval`` / ``eval answers``: the same job the app's Evaluations panel opens."""
    from vrag_desktop.core.datasets import DatasetError
    from vrag_desktop.core.endpoints.profiles import ProfileError, ProfileStore
    from vrag_desktop.core.eval.answers_eval import JudgeRefused
    from vrag_desktop.core.eval.jobs import EvalRequest, open_job
    from vrag_desktop.core.eval.store import EvalError
    from vrag_desktop.core.paths import DataLayout

    answers = args.eval_command == "answers"
    request = EvalRequest(
        args.eval_command,
        args.dataset,
        tuple(args.corpus or ()),
        device=args.device,
        out=args.out,
        restart=args.restart,
        **(
            _answers_options(args)
            if answers
            else {"ks": tuple(args.ks or ()) or None, "hybrid": args.hybrid, "rerank": args.rerank}
        ),
    )

    def noted(m: Any) -> None:
        _say(m.lines(), args.quiet)
        if answers and m.problems:
            err("Items not in the corpora are asked and judged too, without NDCG.", args.quiet)

    layout = DataLayout.resolve(args.data_dir)
    try:
        job = open_job(
            request,
            library(args),
            layout.root,
            ProfileStore(layout.config),
            on_match=noted,
        )
    except ProfileError as exc:
        raise CLIError(f"{exc} (see 'vrag-desktop endpoints')") from exc
    except (DatasetError, EvalError, OSError) as exc:
        raise CLIError(str(exc)) from exc
    if job.store.warning:
        err(f"warning: {job.folder}: {job.store.warning}")
    try:
        return _run_job(job, args, _print_answers if answers else _print_retrieval)
    except JudgeRefused as exc:
        raise CLIError(f"{exc} Fix the judge's profile, then run the same command to resume.") from exc


def _answers_options(args: argparse.Namespace) -> dict[str, Any]:
    names = ("agent", "profile", "model", "judge", "judge_profile", "judge_model", "max_steps")
    return {name: getattr(args, name) for name in names}


def _say(lines: list[str], quiet: bool) -> None:
    for line in lines:
        err(line, quiet)


def _run_job(
    job: EvalJob, args: argparse.Namespace, print_summary: Callable[[dict[str, Any], Path, bool], None]
) -> int:
    """Run the job with Ctrl-C as its cancel and print its summary; an interrupted job exits 130
    (every finished item is kept, so the same command resumes it)."""
    from vrag_desktop.core.progress import CancelToken

    cancel = CancelToken()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.cancel())
    try:
        summary = _drive(job.run(cancel), args.quiet)
    finally:
        signal.signal(signal.SIGINT, previous)
        job.close()
    print_summary(summary, job.store.report_path, args.json)
    if not summary["complete"]:
        err("Interrupted: every finished item is saved. Run the same command again to resume.")
        return EXIT_INTERRUPTED
    return EXIT_OK


def _print_answers(summary: dict[str, Any], report: Path, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=2))
        return

    def f(v: float | None) -> str:
        return "–" if v is None else f"{v:.3f}"

    print(
        f"{summary['items']} item(s): accuracy {f(summary['accuracy'])}   format {f(summary['format'])}"
        f"   {REWARD_NDCG} {f(summary['ndcg'])}   reward {f(summary['reward'])}"
    )
    for qtype, t in summary["by_query_type"].items():
        print(f"  {qtype:<20} {t['items']:>4} item(s)   accuracy {f(t['accuracy'])}")
    if summary["judge_failures"] or summary["errors"]:
        print(f"  {summary['judge_failures']} judge failure(s), {summary['errors']} run error(s)")
    if summary["not_scored"]:
        print(f"  {len(summary['not_scored'])} item(s) without evidence in the corpora: no NDCG")
    print(f"Report: {report}")


def _drive(gen: Any, quiet: bool) -> Any:
    """Run a job generator to its result, with a progress bar (rate and ETA) on stderr."""
    bar: Any = None
    try:
        while True:
            try:
                p = next(gen)
            except StopIteration as stop:
                return stop.value
            if quiet:
                continue
            if bar is None:
                from tqdm import tqdm

                bar = tqdm(total=p.total, initial=p.done, unit="item", dynamic_ncols=True, file=sys.stderr)
            bar.update(p.done - bar.n)
    finally:
        if bar is not None:
            bar.close()
        gen.close()


def _print_retrieval(summary: dict[str, Any], report: Path, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    ov = summary["overall"]
    print(
        f"{summary['items']} item(s) scored"
        + (f", {len(summary['not_scored'])} not scored" if summary["not_scored"] else "")
    )
    for k in summary["ks"]:
        print(
            f"  @{k:<3} recall {ov[f'recall@{k}']:.3f}   hit {ov[f'hit@{k}']:.3f}   ndcg {ov[f'ndcg@{k}']:.3f}"
        )
    print(f"  MRR {ov['mrr']:.3f}   {REWARD_NDCG} {ov['ndcg_original']:.3f}")
    print(f"Report: {report}")
