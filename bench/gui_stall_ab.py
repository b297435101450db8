#!/usr/bin/env python
"""GUI stalls of two source trees in one run: ``bench/gui_stall.py`` for each, alternating.

Why: the machine is shared, so figures taken at different moments are not comparable. This runs
the whole stall bench (a fresh process: start-up, first indexing, a second indexing) for a baseline
tree and the current one in turns — A B B A A B … — so other processes' load falls on both alike,
and prints each round's longest stall, p99 and stalls over 50 ms per phase, with the CPU share
other processes took during the phase.

    git worktree add /tmp/work/baseline d7a1047      # the commit before the work measured
    git worktree add /tmp/work/current HEAD          # committed work only (not others' half-edits)
    .venv/bin/python bench/gui_stall_ab.py --tree /tmp/work/baseline --current /tmp/work/current \\
        --rounds 2 -- --pages 150 --reps 2

Arguments after ``--`` go to ``gui_stall.py`` (default here: ``--startup 5 --no-baselines --py-spy
none``, so the start-up phase is measured and no profiler runs). Writes bench/out/gui_stall_ab.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, required=True, help="baseline source tree")
    ap.add_argument("--current", type=Path, default=ROOT, help="current source tree (default: this checkout)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gui_stall_ab.json")
    args = ap.parse_args(own)
    defaults = ["--startup", "5", "--no-baselines", "--py-spy", "none"]
    trees = [("baseline", args.tree.resolve()), ("current", args.current.resolve())]
    out_dir = args.out.parent / "gui_stall_ab"
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for r in range(args.rounds):
        for name, tree in trees if r % 2 == 0 else trees[::-1]:
            out = out_dir / f"{name}_{r + 1}.json"
            cmd = [sys.executable, str(ROOT / "bench" / "gui_stall.py"), *defaults, *extra, "--out", str(out)]
            env = {**os.environ, "VRAG_BENCH_TREE": str(tree)}
            t = time.perf_counter()
            print(f"round {r + 1}: {name} ({tree}) …", flush=True)
            subprocess.run(cmd, env=env, check=True)
            report = json.loads(out.read_text())
            report["wall_s"] = round(time.perf_counter() - t)
            results[name].append(report)

    summary: dict[str, Any] = {
        "trees": {n: str(t) for n, t in trees},
        "rounds": args.rounds,
        "args": extra,
        "machine": results["current"][0]["machine"],
        "phases": {},
    }
    labels = [p["label"] for p in results["current"][0]["phases"]]
    for label in labels:
        row: dict[str, Any] = {}
        for name, _ in trees:
            got = [next((p for p in rep["phases"] if p["label"] == label), None) for rep in results[name]]
            row[name] = [
                {
                    "max_ms": p["max_ms"],
                    "p99_ms": p["p99_ms"],
                    "over_50ms": p["over_50ms"],
                    "seconds": p["seconds"],
                    "others_cpu": p["cpu"]["other_cpu_share"],
                    "tab_switch_max_ms": (p.get("tab_switches") or {}).get("max_ms"),
                    "tab_switches_over_50ms": (p.get("tab_switches") or {}).get("over_50ms"),
                }
                for p in got
                if p is not None
            ]
        summary["phases"][label] = row
    args.out.write_text(json.dumps(summary, indent=2))

    m = summary["machine"]
    print(
        f"\n{m['cpu_model']}, {m.get('cpus_usable', m['cpu_count'])} cores; {args.rounds} rounds, alternating; "
        f"gui_stall.py {' '.join(defaults + extra)}\n"
    )
    print(
        "| phase | tree | longest stall ms (per round) | p99 ms | stalls > 50 ms | longest tab switch ms "
        "| tab switches > 50 ms | others' CPU |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, row in summary["phases"].items():
        for name, _ in trees:
            rs = row[name]
            if not rs:
                continue
            print(
                f"| {label} | {name} | {' / '.join(str(x['max_ms']) for x in rs)} | "
                f"{' / '.join(str(x['p99_ms']) for x in rs)} | {' / '.join(str(x['over_50ms']) for x in rs)} | "
                f"{' / '.join(str(x['tab_switch_max_ms']) for x in rs)} | "
                f"{' / '.join(str(x['tab_switches_over_50ms']) for x in rs)} | "
                f"{statistics.median(x['others_cpu'] for x in rs):.0%} |"
            )


if __name__ == "__main__":
    main()
