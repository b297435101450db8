#!/usr/bin/env python
"""Cold start of the desktop app: from spawning the process to a visible main window.

The person double-clicks and waits; what counts is the time from process creation to a shown
window, so the figure here is measured from outside: ``Popen`` of ``python -m vrag_desktop gui``
(with ``VRAG_DESKTOP_STARTUP_PROBE=1`` the app prints ``window-visible <s>`` once the window is
shown and events were processed, then closes) to the moment that line arrives on the pipe. The
app's own in-process figure (from ``qt.app.main()`` entry, so without interpreter start and the CLI
import) is recorded too.

Baselines, measured the same way in the same run:

- ``python -c 'pass'``: the interpreter's own start, the floor for any Python app.
- an empty ``QMainWindow``: import ``PySide6.QtWidgets``, create the ``QApplication``, show an empty
  1600×1000 window, process events. The floor for any PySide6 window.

"First" runs come after dropping the kernel's page cache (``/proc/sys/vm/drop_caches``, needs root;
otherwise ``posix_fadvise(DONTNEED)`` on the interpreter's and venv's files, which cannot evict pages
other processes map) so files are read from disk; the rest are warm. On a VM the host may still
cache the disk, so "first" is an optimistic cold start.

A separate ``-X importtime`` run lists which heavy libraries were imported before the window showed
(the target needs them lazy: torch, transformers, faiss, cv2, pymupdf, numpy, onnxruntime, …) and
their cumulative import time (``-X importtime`` itself slows imports, so use those numbers only to
rank).

Target (issue 4): ≤ 1.5 s from start to a visible window, on the 2-core development machine;
issue 31: ≤ 1.0 s on a fresh data directory. Every start of the app gets a new, empty data
directory (the settings say the welcome was seen).

Before and after in one run (issue 31): ``--baseline-tree DIR`` starts the app from another source
tree too (e.g. ``git worktree add --detach /tmp/base HEAD`` before the change), interleaved with
this one, so the machine's load falls on both alike.

    .venv/bin/python bench/cold_start.py [--runs 10] [--no-drop-caches] [--xcb] [--baseline-tree DIR]

Writes bench/out/cold_start.json and prints markdown tables.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import Phase, machine_info  # noqa: E402
from vrag_desktop.qt.app import NOT_BEFORE_WINDOW  # noqa: E402

TARGET_S = 1.0
HEAVY = NOT_BEFORE_WINDOW  # one list, the app's: tests/test_cold_start_imports.py refuses them
EMPTY_WINDOW = """\
import time
t0 = time.perf_counter()
import sys
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication(sys.argv[:1])
w = QMainWindow()
w.setWindowTitle("baseline")
w.resize(1600, 1000)
w.show()
app.processEvents()
print(f"window-visible {time.perf_counter() - t0:.4f} cpu {time.process_time():.4f}", flush=True)
w.close()
"""


# ============================================================================ caches
def drop_caches(paths: list[Path]) -> str:
    """Evict file pages so the next start reads from disk; returns the method used."""
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return "drop_caches"
    except OSError:
        pass
    n = 0
    for root in paths:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                try:
                    fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                except OSError:
                    pass
                finally:
                    os.close(fd)
    return f"fadvise({n} files)"


# ============================================================================ one start
def spawn(cmd: list[str], env: dict[str, str], timeout: float = 60.0, cwd: Path = ROOT) -> dict:
    """Start ``cmd`` (in ``cwd``, with a new empty data directory); seconds until its
    'window-visible' line arrived, and until it exited."""
    env = {**env, "VRAG_DESKTOP_DATA_DIR": tempfile.mkdtemp(prefix="data-", dir=env["VRAG_COLD_TMP"])}
    t0 = time.perf_counter()
    c0 = os.times()
    with Phase() as ph:
        p = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, cwd=cwd
        )
        assert p.stdout is not None
        visible = in_process = cpu_at_window = built = cpu_at_built = None
        lines = []
        for line in p.stdout:
            parts = line.split()
            if visible is None and line.startswith("window-visible"):
                visible = time.perf_counter() - t0
                in_process = float(parts[1])
                cpu_at_window = float(parts[3]) if len(parts) > 3 and parts[2] == "cpu" else None
            elif built is None and line.startswith("panels-built"):  # the docks hidden until used
                built = time.perf_counter() - t0
                cpu_at_built = float(parts[3]) if len(parts) > 3 and parts[2] == "cpu" else None
            lines.append(line)
        rc = p.wait(timeout)
    total = time.perf_counter() - t0
    c1 = os.times()
    child = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    # Phase counts the child's CPU as "other"; take it out: what is left is other processes'
    other = ph.info["other_cpu_share"] * (os.cpu_count() or 1) * ph.seconds - child
    out: dict[str, object] = {
        "visible_s": round(visible, 4) if visible is not None else None,
        "in_process_s": in_process,
        "cpu_at_window_s": cpu_at_window,  # the app's CPU (all threads) from process start to the window
        # once the panels made after the first paint are made (trees with a deferred build only)
        "panels_built_s": round(built, 4) if built is not None else None,
        "cpu_at_panels_built_s": cpu_at_built,
        "exit_s": round(total, 4),
        "rc": rc,
        "child_cpu_s": round(child, 3),
        "other_cpu_share": round(max(0.0, other) / ((os.cpu_count() or 1) * ph.seconds), 3),
    }
    if visible is None or rc != 0:
        out["output_tail"] = "".join(lines)[-3000:]
    return out


# ============================================================================ import time
def parse_importtime(lines: list[str]) -> dict:
    """Per module: cumulative µs of its first import (``-X importtime`` lines before the window)."""
    cumulative: dict[str, int] = {}
    order: list[str] = []
    for line in lines:
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:") :].split("|")
        try:
            cum = int(parts[1].strip())
        except ValueError:
            continue  # the header line
        name = parts[2].strip()
        if name not in cumulative:
            cumulative[name] = cum
            order.append(name)
    return {"cumulative_us": cumulative, "order": order}


def import_report(cmd: list[str], env: dict[str, str]) -> dict:
    p = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    lines = p.stdout.splitlines()
    cut = next((i for i, ln in enumerate(lines) if ln.startswith("window-visible")), None)
    before = lines if cut is None else lines[:cut]
    after = [] if cut is None else lines[cut + 1 :]
    parsed = parse_importtime(before)
    cum = parsed["cumulative_us"]
    heavy = {h: round(cum[h] / 1000, 1) for h in HEAVY if h in cum}
    heavy_after = sorted({h for h in HEAVY if h in parse_importtime(after)["cumulative_us"]} - set(heavy))
    top_level = sorted(
        ((n, us) for n, us in cum.items() if "." not in n), key=lambda kv: kv[1], reverse=True
    )[:20]
    ours = sorted(
        ((n, us) for n, us in cum.items() if n.startswith("vrag_desktop")),
        key=lambda kv: kv[1],
        reverse=True,
    )[:12]
    return {
        "window_line_seen": cut is not None,
        "modules_before_window": len(parsed["order"]),
        "heavy_before_window_ms": heavy,
        "heavy_imported_only_after_window": heavy_after,
        "top_level_packages_ms": [(n, round(us / 1000, 1)) for n, us in top_level],
        "vrag_desktop_modules_ms": [(n, round(us / 1000, 1)) for n, us in ours],
        "rc": p.returncode,
    }


# ============================================================================ who imports what, where
IMPORT_HOOK = """\
import sys, threading, time, traceback
HEAVY = set(sys.argv[1].split(","))
T0 = time.perf_counter()
class Spy:
    seen = set()
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in HEAVY and top not in Spy.seen:
            Spy.seen.add(top)
            frames = [f for f in traceback.extract_stack()[:-1] if "vrag_desktop" in f.filename]
            where = (f"{frames[-1].filename.split('vrag_desktop/')[-1]}:{frames[-1].lineno} {frames[-1].name}"
                     if frames else "(no vrag_desktop frame)")
            print(f"import-by {top}\t{threading.current_thread().name}\t"
                  f"{time.perf_counter() - T0:.3f}\t{where}", flush=True)
        return None
sys.meta_path.insert(0, Spy())
sys.argv = ["vrag-desktop", "gui"]
from vrag_desktop.cli.main import main
sys.exit(main())
"""

PROFILE = """\
import builtins, cProfile, io, json, pstats, sys
sys.argv = ["vrag-desktop", "gui"]
from vrag_desktop.cli.main import main
prof = cProfile.Profile()
say = builtins.print
def print_(*args, **kw):  # the probe's window-visible line ends the profile (not what comes after)
    if args and str(args[0]).startswith("window-visible"):
        prof.disable()
    say(*args, **kw)
builtins.print = print_
prof.enable()
main()
prof.disable()
builtins.print = say
st = pstats.Stats(prof)
rows = []
for (file, line, fn), (cc, nc, tt, ct, callers) in st.stats.items():
    where = file[file.find("vrag_desktop/"):] if "vrag_desktop/" in file else file
    rows.append((f"{where}:{line}({fn})", round(ct * 1000, 1), round(tt * 1000, 1)))
ours = sorted([r for r in rows if "vrag_desktop/" in r[0]], key=lambda r: -r[1])[:25]
self_time = sorted(rows, key=lambda r: -r[2])[:15]
print("PROFILE-JSON " + json.dumps({"ours_by_cumulative_ms": ours, "all_by_self_ms": self_time}), flush=True)
"""


def import_threads(py: str, env: dict[str, str]) -> list[dict]:
    """Which thread first imported each heavy package, when, and from which app function."""
    p = subprocess.run(
        [py, "-c", IMPORT_HOOK, ",".join(HEAVY)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    out, before = [], True
    for line in p.stdout.splitlines():
        if line.startswith("window-visible"):
            before = False
        if line.startswith("import-by "):
            mod, thread, t, where = line[len("import-by ") :].split("\t")
            out.append(
                {"module": mod, "thread": thread, "t_s": float(t), "before_window": before, "from": where}
            )
    return out


def profile_start(py: str, env: dict[str, str]) -> dict:
    """cProfile of the GUI thread from ``main()`` to the visible window (our functions, and self time)."""
    p = subprocess.run(
        [py, "-c", PROFILE], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    for line in p.stdout.splitlines():
        if line.startswith("PROFILE-JSON "):
            return json.loads(line[len("PROFILE-JSON ") :])  # type: ignore[no-any-return]
    return {"error": p.stdout[-2000:]}


# ============================================================================ main
def summary(runs: list[dict], key: str) -> dict:
    vals = [r[key] for r in runs if r.get(key) is not None]
    if not vals:
        return {}
    return {
        "n": len(vals),
        "median": round(statistics.median(vals), 3),
        "min": round(min(vals), 3),
        "max": round(max(vals), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="warm starts of each command")
    ap.add_argument("--no-drop-caches", action="store_true", help="skip the first (cache-dropped) starts")
    ap.add_argument("--xcb", action="store_true", help="use the X11 platform (needs a display)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "cold_start.json")
    ap.add_argument(
        "--baseline-tree", type=Path, help="also start the app from this source tree (before/after)"
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="vrag-coldstart-"))
    env = dict(os.environ)
    env.update(
        VRAG_DESKTOP_STARTUP_PROBE="1",
        VRAG_DESKTOP_DATA_DIR=str(tmp / "data"),
        VRAG_DESKTOP_CONFIG_DIR=str(tmp / "cfg"),
        VRAG_COLD_TMP=str(tmp),
    )
    # A person's install has its .pyc files: any value of this variable, "0" too, stops Python writing
    # them, and then every start compiled the app's ~100 modules again (~1 s here). The unmeasured start
    # below writes them, for both trees.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["QT_QPA_PLATFORM"] = "xcb" if args.xcb else "offscreen"
    # A returning person: settings exist and the first-run welcome was seen (its sample indexing
    # would start after the window anyway, but the welcome dialog is not what this measures).
    from vrag_desktop.core.settings import AppSettings, save_settings

    save_settings(AppSettings(first_run_done=True), tmp / "cfg")

    py = sys.executable
    commands = {
        "python -c pass (interpreter floor)": [py, "-c", "pass"],
        "empty PySide6 QMainWindow (Qt floor)": [py, "-c", EMPTY_WINDOW],
        "vrag-desktop gui (the app)": [py, "-m", "vrag_desktop", "gui"],
    }
    cwds = {name: ROOT for name in commands}
    if args.baseline_tree:  # python -m puts the working directory first on sys.path: that tree's app
        commands["vrag-desktop gui (baseline tree)"] = [py, "-m", "vrag_desktop", "gui"]
        cwds["vrag-desktop gui (baseline tree)"] = args.baseline_tree.resolve()
    venv_and_python = [Path(sys.prefix), Path(sys.base_prefix), ROOT / "vrag_desktop"]
    results: dict[str, dict] = {name: {"first": None, "warm": []} for name in commands}
    method = None
    if not args.no_drop_caches:
        for name, cmd in commands.items():
            method = drop_caches(venv_and_python)
            results[name]["first"] = spawn(cmd, env, cwd=cwds[name])
    for name, cmd in commands.items():  # one unmeasured start each, so all are equally warm
        spawn(cmd, env, cwd=cwds[name])
    for i in range(args.runs):  # interleaved (order alternating), so drift in load hits all alike
        for name, cmd in list(commands.items())[:: 1 if i % 2 == 0 else -1]:
            results[name]["warm"].append(spawn(cmd, env, cwd=cwds[name]))

    imports = import_report(commands["vrag-desktop gui (the app)"], env)
    imports["first_import_by_thread"] = import_threads(py, env)
    profile = profile_start(py, env)
    for name in commands:
        r = results[name]
        r["warm_visible_s"] = summary(r["warm"], "visible_s")
        r["warm_in_process_s"] = summary(r["warm"], "in_process_s")
        r["warm_exit_s"] = summary(r["warm"], "exit_s")
        r["warm_child_cpu_s"] = summary(r["warm"], "child_cpu_s")
        r["warm_cpu_at_window_s"] = summary(r["warm"], "cpu_at_window_s")
        r["warm_panels_built_s"] = summary(r["warm"], "panels_built_s")
        r["warm_cpu_at_panels_built_s"] = summary(r["warm"], "cpu_at_panels_built_s")
        shares = sorted(x["other_cpu_share"] for x in r["warm"])
        r["warm_other_cpu_share_median"] = shares[len(shares) // 2] if shares else None
        failures = [x for x in r["warm"] + [r["first"] or {}] if x and x.get("rc")]
        if failures:
            print(f"!! {name}: {len(failures)} starts failed:\n{failures[0].get('output_tail', '')}")

    machine = machine_info()
    report = {
        "machine": machine,
        "platform_plugin": env["QT_QPA_PLATFORM"],
        "cache_drop_method": method,
        "target_s": TARGET_S,
        "loadavg_at_end": os.getloadavg(),
        "results": results,
        "imports": imports,
        "gui_thread_profile": profile,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)

    def f(x: float | None) -> str:
        return "—" if x is None else f"{x:.2f}"

    print(
        f"\nplatform {env['QT_QPA_PLATFORM']}; first start after {method or 'no cache drop'}; {args.runs} warm\n"
    )
    print(
        "| Start → visible window | first (cold cache) s | warm median s | warm min–max s | in-process median s "
        "| its CPU to the window, median s | its CPU to exit, median s | others' CPU |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        first = r["first"]["visible_s"] if r["first"] else None
        w, ip = r["warm_visible_s"], r["warm_in_process_s"]
        spread = f"{f(w.get('min'))}–{f(w.get('max'))}" if w else "—"
        if name.startswith("python -c"):  # no window: process exit instead
            first = r["first"]["exit_s"] if r["first"] else None
            w = r["warm_exit_s"]
            spread = f"{f(w.get('min'))}–{f(w.get('max'))}"
        print(
            f"| {name} | {f(first)} | {f(w.get('median'))} | {spread} | {f(ip.get('median') if ip else None)} "
            f"| {f(r['warm_cpu_at_window_s'].get('median'))} | {f(r['warm_child_cpu_s'].get('median'))} "
            f"| {r['warm_other_cpu_share_median']:.0%} |"
        )
    if args.baseline_tree:  # pair by pair: the same round's starts saw the same load
        app, base = (
            results[n]["warm"] for n in ("vrag-desktop gui (the app)", "vrag-desktop gui (baseline tree)")
        )
        for key, what in (
            ("visible_s", "start → visible"),
            ("cpu_at_window_s", "the app's CPU to the window"),
        ):
            ratios = [a[key] / b[key] for a, b in zip(app, base, strict=True) if a[key] and b[key]]
            if ratios:
                print(
                    f"this tree / baseline tree, {what}, pair by pair: median {statistics.median(ratios):.2f} "
                    f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
                )
    for name, r in results.items():  # what the window no longer waits for is still done at start
        b, c = r["warm_panels_built_s"], r["warm_cpu_at_panels_built_s"]
        if b:
            print(
                f"{name}: the hidden docks' panels made {f(b.get('median'))} s after the start "
                f"(its CPU by then {f(c.get('median'))} s), medians"
            )
    la0 = tuple(round(x, 2) for x in machine["loadavg_at_start"])
    la1 = tuple(round(x, 2) for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at start {la0}, at end {la1}")
    print(f"\nTarget ≤ {TARGET_S} s.")
    print("\nHeavy modules imported before the window showed (cumulative ms under -X importtime):")
    print("| module | ms |\n|---|---|")
    for mod, ms in sorted(imports["heavy_before_window_ms"].items(), key=lambda kv: -kv[1]):
        print(f"| {mod} | {ms:.1f} |")
    print("\nFirst import of each heavy package: thread, seconds after start, app function")
    for r in imports["first_import_by_thread"]:
        when = "before" if r["before_window"] else "after"
        print(f"- {r['module']}: {r['thread']} at {r['t_s']:.2f} s ({when} the window) from {r['from']}")
    print("\nGUI thread, main() to visible window (cProfile, cumulative ms; profiling inflates):")
    for name, cum, _self in profile.get("ours_by_cumulative_ms", [])[:12]:
        print(f"- {cum:7.1f}  {name}")
    print(f"\nonly after the window: {', '.join(imports['heavy_imported_only_after_window']) or 'none'}")
    print("\nLargest top-level imports before the window (ms, cumulative):")
    print(", ".join(f"{n} {ms:.0f}" for n, ms in imports["top_level_packages_ms"][:12]))
    print("Our modules: " + ", ".join(f"{n} {ms:.0f}" for n, ms in imports["vrag_desktop_modules_ms"][:8]))


if __name__ == "__main__":
    main()
