"""Per-step agent overhead, excluding model time: what VRAG Desktop adds around each model call.

Measured with the agents' own code paths (``VRAGAgent``'s and ``VimRAGAgent``'s run objects), on
text-heavy 2000×2800 pages (a 200-dpi render):

- VRAG search step (``show_page``): decode the page at reduced JPEG scale, resize to ≤ 401,408 px,
  JPEG-encode, write the file and the data URI. "new page": a page not seen before in the process
  (the pages rotate; nothing kept on disk either); "its view kept": a page new to the process whose
  view is kept on disk (``core/agents/page_views.py``: made when an original index is imported, or
  by its first show in any earlier run); "page seen before": the same page again.
- VRAG crop step (``cut``): crop the full-resolution page (kept for the run), zoom, encode.
- VimRAG graph step: add a search node and memorize an item (validation, energy).
- VimRAG context rebuild in a run of 20+ nodes: action graph JSON, energy-based selection of the
  top 5 memory items, each encoded at its pixel budget (≤ 38 KB). Each step is driven as
  ``_Run.search`` and ``_Run.memorize`` drive it: the tool response is prepared (the page shown),
  a tree that encodes ahead (``speculate_pending``) starts doing so, the model writes its judgement,
  the judgement is applied, then the rebuild is timed. "per step": the model's judgement takes at
  least as long as the encoding ahead (a model writes for seconds; that background time is listed
  as "encoding ahead"); "model judges at once": the rebuild starts while the encoding ahead may
  still run; "from cold": a new 20-node run with nothing kept (the worst case).

Target (issue 3/8): ≤ 20 ms p50 per step on the 2-core development machine.

**Baseline in the same run:** ``--tree DIR`` (a checkout of an older commit, e.g.
``git worktree add /tmp/work/baseline d7a1047``) measures that tree and this one in alternating
child processes (A, B, A, B … ``--rounds`` times), so load from other processes hits both alike, and
checks that both send the model the same bytes (the digests of every request of the scripted runs in
``tests/agent_script.py``). Each child records the CPU share other processes took while it ran.

    .venv/bin/python bench/agent_overhead.py [--tree /tmp/work/baseline] [--rounds 6] [--repeat 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 20.0
N_PAGES = 21

STEPS = [
    ("vrag_search_step", "VRAG search step, new page (first show, nothing kept)"),
    ("vrag_search_step_kept", "VRAG search step, new page, its view kept (imported index, earlier run)"),
    ("vrag_search_step_seen", "VRAG search step, page seen before"),
    ("vrag_crop_step", "VRAG crop step"),
    ("vimrag_graph_step", "VimRAG graph step"),
    (
        "vimrag_context_rebuild_per_step",
        "VimRAG context rebuild per step (model's judgement takes ≥ the encoding ahead)",
    ),
    ("vimrag_context_rebuild_instant_reply", "VimRAG context rebuild per step, model judges at once"),
    ("vimrag_encoding_ahead", "VimRAG encoding ahead per search (background, off the path)"),
    ("vimrag_context_rebuild_20_nodes", "VimRAG context rebuild from cold (20 nodes)"),
]


# ============================================================================ child: one tree
def child(tree: Path, pages_dir: Path, repeat: int) -> dict[str, Any]:
    """Time every step with ``tree``'s vrag_desktop (imported from there), ``repeat`` samples each."""
    sys.path.insert(0, str(tree))
    import vrag_desktop  # first: its submodules then come from the package's own folder

    assert Path(vrag_desktop.__file__).resolve().is_relative_to(tree.resolve()), vrag_desktop.__file__
    sys.path.insert(1, str(ROOT / "tests"))
    sys.path.insert(2, str(ROOT))
    from agent_script import make_pages, vimrag_digests, vrag_digests
    from PIL import Image

    from bench.ingest import Phase
    from vrag_desktop.core.agents import vrag_protocol as vp
    from vrag_desktop.core.agents.memory_graph import Frame, MemoryEntry
    from vrag_desktop.core.agents.searchers import SearchHit
    from vrag_desktop.core.agents.vimrag import VimRAGAgent
    from vrag_desktop.core.agents.vimrag import _Run as VimRun

    try:
        from vrag_desktop.core.agents.vimrag_media import _Pending as Pending
    except ImportError:  # a tree from before the memory split keeps it beside the run
        from vrag_desktop.core.agents.vimrag import _Pending as Pending  # type: ignore[attr-defined,no-redef]
    from vrag_desktop.core.agents.vrag import VRAGAgent
    from vrag_desktop.core.agents.vrag import _Run as VragRun

    try:
        from vrag_desktop.core.agents import imaging

        forget = imaging.clear
    except ImportError:  # an older tree keeps no decodes

        def forget() -> None:
            pass

    for mod in (vp, VimRun, VragRun):
        assert (
            Path(sys.modules[mod.__module__ if isinstance(mod, type) else mod.__name__].__file__ or "")
            .resolve()
            .is_relative_to(tree.resolve())
        )
    pages = sorted(pages_dir.glob("page_*.jpg"))[:N_PAGES]
    out = Path(tempfile.mkdtemp(prefix="vrag-overhead-out-"))
    views = Path(tempfile.mkdtemp(prefix="vrag-overhead-views-"))
    os.environ["VRAG_DESKTOP_VIEW_CACHE"] = str(views)  # trees without kept views ignore it

    def forget_all() -> None:
        forget()
        try:
            from vrag_desktop.core.agents import page_views

            page_views.flush()  # the last show's view is written in the background
        except ImportError:
            pass
        shutil.rmtree(views, ignore_errors=True)

    def hit(p: Path) -> Any:
        return SearchHit(score=1.0, name=p.stem, source=str(p), modality="page", image=str(p), page=1)

    class Local:
        local_files = True

        def load_image(self, path: str) -> bytes:
            return Path(path).read_bytes()

    vrag = VragRun(VRAGAgent(model=None, searcher=Local(), image_dir=out), "q")  # type: ignore[arg-type]
    turn = iter(range(10**6))

    def vrag_search_step() -> None:
        vrag.show_page(hit(pages[next(turn) % len(pages)]))

    def vrag_search_step_seen() -> None:
        vrag.show_page(hit(pages[0]))

    kept_turn = iter(range(10**6))
    kept_page: list[Path] = []

    def keep_next_view() -> None:
        forget()  # no decode kept in the process: only the view on disk
        kept_page[:] = [pages[next(kept_turn) % len(pages)]]
        try:
            from vrag_desktop.core.agents import page_views
        except ImportError:  # a tree from before kept views: this is its new-page step
            return
        for _ in page_views.prepare(kept_page, vrag.a.view_spec):
            pass

    def vrag_search_step_kept() -> None:
        vrag.show_page(hit(kept_page[0]))

    reply = "<think>The table in the middle holds the figure.</think>\n<bbox>[80, 190, 460, 330]</bbox>"

    def vrag_crop_step() -> None:
        t = vp.parse_turn(reply)
        with Image.open(pages[0]) as im:
            raw_size = im.size
        view = vp.View(vp.fit_pixels(*raw_size), raw_size)
        region, crop_view = view.zoom(vp.parse_bbox(t.argument or "", view.shown_size))
        vrag.cut(str(pages[0]), region, crop_view.shown_size)

    agent = VimRAGAgent(model=None, searcher=Local(), image_dir=out)  # type: ignore[arg-type]

    def fresh_run(n_nodes: int) -> Any:
        run = VimRun(agent, "What was the revenue by region?")
        for i in range(n_nodes):
            nid = f"search {i}"
            parents = ["root"] if i == 0 else [f"search {max(0, i - 1 - (i % 3))}"]
            run.graph.add_search(nid, parents, f"query number {i} about revenue", created_at=i)
            entry = MemoryEntry("Picture 1", "image", 1 + i % 5, [Frame(path=str(pages[i % len(pages)]))])
            run.graph.memorize(nid, f"summary of search {i}", [entry])
        return run

    counter = iter(range(10**6))

    def vimrag_graph_step() -> None:
        run = fresh_run(0)
        i = next(counter)
        run.graph.add_search(f"n{i}", ["root"], "q")
        run.graph.memorize(f"n{i}", "s", [MemoryEntry("Picture 1", "image", 4, [Frame(path=str(pages[1]))])])

    def vimrag_rebuild_20() -> None:
        forget()
        fresh_run(20).build_context()

    background: list[float] = []  # ms from the search's results to the speculation's end

    def grower(model_writes: bool) -> Any:
        """A 20-node run growing by one search a step, as ``_Run.search`` and ``memorize`` drive it:
        the tool response is prepared (the page shown), a tree that encodes ahead starts doing so,
        the model writes its judgement (``model_writes``: for as long as the encoding ahead takes;
        else it answers at once), the judgement is applied; then the timed rebuild."""
        run = fresh_run(20)
        run.build_context()
        grow = iter(range(20, 10**6))
        judgement = [
            {"information_id": "Picture 1", "is_useful": True, "priority_score": 3, "key_timestamp": []}
        ]

        def prepare() -> None:
            i = next(grow)
            node = f"search {i}"
            run.graph.add_search(node, [f"search {i - 1}"], f"query {i}", created_at=i)
            run.pending = Pending(node, run.prepare([hit(pages[i % len(pages)])]).items)
            t = time.perf_counter()
            if hasattr(run, "speculate_pending"):
                run.speculate_pending(run.pending)
                if model_writes:
                    run.settle()
                    background.append((time.perf_counter() - t) * 1000)
            entries, _, _ = run.judge(run.pending, judgement)
            run.graph.memorize(node, "s", entries)
            run.pending = None

        return prepare, run.build_context

    steps: dict[str, tuple[Any, Any]] = {
        "vrag_search_step": (forget_all, vrag_search_step),
        "vrag_search_step_kept": (keep_next_view, vrag_search_step_kept),
        "vrag_search_step_seen": (None, vrag_search_step_seen),
        "vrag_crop_step": (None, vrag_crop_step),
        "vimrag_graph_step": (None, vimrag_graph_step),
        "vimrag_context_rebuild_per_step": grower(True),
        "vimrag_context_rebuild_instant_reply": grower(False),
        "vimrag_context_rebuild_20_nodes": (None, vimrag_rebuild_20),
    }
    samples: dict[str, list[float]] = {}
    with Phase() as ph:
        for name, (prepare, fn) in steps.items():
            if prepare:
                prepare()
            fn()  # warm-up
            ms = []
            for _ in range(repeat):
                if prepare:
                    prepare()
                t = time.perf_counter()
                fn()
                ms.append((time.perf_counter() - t) * 1000)
            samples[name] = ms
        if background:
            samples["vimrag_encoding_ahead"] = background[-repeat:]
    small = make_pages(pages_dir / "script", 9)
    forget()
    digests = {
        "vrag": vrag_digests(small, out / "vrag-script"),
        "vimrag": vimrag_digests(small, out / "vimrag-script"),
    }
    return {"samples": samples, "cpu": ph.info, "loadavg": os.getloadavg(), "digests": digests}


# ============================================================================ parent: rounds
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, help="baseline source tree, measured alternately with this one")
    ap.add_argument("--rounds", type=int, default=6, help="child processes per tree (alternating)")
    ap.add_argument("--repeat", type=int, default=10, help="samples per step per child")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "agent_overhead.json")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--pages", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.pages, args.repeat)))
        return

    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from agent_script import make_pages

    from bench.ingest import machine_info

    pages_dir = Path(tempfile.mkdtemp(prefix="vrag-overhead-"))
    make_pages(pages_dir, N_PAGES)
    trees = [("baseline", args.tree.resolve()), ("current", ROOT)] if args.tree else [("current", ROOT)]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for r in range(args.rounds):
        for name, tree in trees if r % 2 == 0 else trees[::-1]:  # A B B A A B …: neither always first
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")])),
            }
            cmd = [sys.executable, __file__, "--child", str(tree), "--pages", str(pages_dir)]
            cmd += ["--repeat", str(args.repeat)]
            res = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
            if res.returncode:
                raise SystemExit(f"{name} child failed:\n{res.stderr[-3000:]}")
            runs[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(
                f"  round {r + 1} {name}: others' CPU {runs[name][-1]['cpu']['other_cpu_share']:.0%}",
                flush=True,
            )

    table: dict[str, dict[str, Any]] = {}
    for step, _ in STEPS:
        table[step] = {}
        for name, _ in trees:
            pooled = sorted(x for run in runs[name] for x in run["samples"].get(step, []))
            per_round = [
                statistics.median(run["samples"][step]) for run in runs[name] if step in run["samples"]
            ]
            if pooled:
                table[step][name] = {
                    "p50_ms": round(statistics.median(pooled), 2),
                    "p90_ms": round(pooled[int(0.9 * (len(pooled) - 1))], 2),
                    "round_p50s_ms": [round(x, 2) for x in per_round],
                    "n": len(pooled),
                }
    same = None
    if args.tree:
        digests = {name: {json.dumps(run["digests"]) for run in runs[name]} for name, _ in trees}
        same = digests["baseline"] == digests["current"] and len(digests["current"]) == 1
    report = {
        "machine": machine_info(),
        "trees": {name: str(tree) for name, tree in trees},
        "rounds": args.rounds,
        "repeat": args.repeat,
        "others_cpu_share": {
            name: [run["cpu"]["other_cpu_share"] for run in runs[name]] for name, _ in trees
        },
        "loadavg_per_child": {name: [run["loadavg"] for run in runs[name]] for name, _ in trees},
        "same_bytes_to_the_model": same,
        "steps": table,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))

    names = [name for name, _ in trees]
    print(
        f"\n{report['machine']['cpu_model']}, {report['machine']['cpu_count']} cores; {args.rounds} rounds × "
        f"{args.repeat} samples per tree; others' CPU "
        + ", ".join(f"{n} {statistics.median(report['others_cpu_share'][n]):.0%}" for n in names)
        + " (median)\n"
    )
    print("| step (2000×2800 page) | " + " | ".join(f"{n} p50 / p90 ms" for n in names) + " | target p50 |")
    print("|---|" + "---|" * len(names) + "---|")
    for step, label in STEPS:
        cells = [
            f"{table[step][n]['p50_ms']:.1f} / {table[step][n]['p90_ms']:.1f}" if n in table[step] else "—"
            for n in names
        ]
        print(f"| {label} | " + " | ".join(cells) + f" | ≤ {TARGET_MS:.0f} |")
    if same is not None:
        print(f"\nSame bytes sent to the model by both trees (scripted VRAG and VimRAG runs): {same}")


if __name__ == "__main__":
    main()
