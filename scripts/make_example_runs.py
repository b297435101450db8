"""Record the example runs the app ships (resources/example_runs/): one VRAG run, one VimRAG run.

Why recorded: a newcomer should see what a run looks like (search, crop, memory graph, answer with
its evidence) before any model works. Each example is a real run of the app's own agents through
the public API (``vrag_desktop.VRAG`` / ``VimRAG``): the bundled sample corpus indexed with the
default embedder, real searches, real page views and crops cut by the agent, a real saved run. Only
the model's words are scripted: a loopback OpenAI-compatible server (tests/scripted_openai.py)
answers the way the model would, with boxes computed from where the revenue table really is on the
annual report's page. The app labels them "Example (recorded)" and says the replies were scripted.

The saved runs are then made portable: every path in the events becomes relative to the example's
folder (its ``images/``, and ``../../sample_corpus/…`` for the corpus's own files); page renders the
run pointed at inside the temporary data directory are copied into ``images/``; every image is
re-encoded as a modest-quality JPEG of the same pixel size (regions are in those pixels). The script
fails if any absolute path of this machine is left, or if a run did not go as scripted.

    .venv/bin/python scripts/make_example_runs.py            # write resources/example_runs/
    .venv/bin/python scripts/make_example_runs.py --out DIR  # somewhere else (tests, a look first)

Deterministic in what it checks, not byte for byte (scores and times vary in their last digits).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

SAMPLE = ROOT / "resources" / "sample_corpus"
JPEG_QUALITY = 60
REPORT = "northwind_annual_report_2024"

VRAG_QUESTION = "Which region generated the most revenue for Northwind last year, and how much?"
VIMRAG_QUESTION = "How heavy a load can the Atlas robot carry, and how long does it run per charge?"

TITLES = {
    "vrag": "VRAG: search, zoom into the table, answer",
    "vimrag": "VimRAG: two searches in a memory graph, then the answer",
}
NOTE = (
    "Recorded by scripts/make_example_runs.py: the app's {agent} agent searched the bundled sample "
    "corpus and cut its page views and crops itself; the model's replies were scripted, so no model "
    "was needed. Read-only; not one of your runs."
)


# ---------------------------------------------------------------- the scripted model


def vimrag_script() -> list[Any]:
    """VimRAG turns: search the robot's specs, memorize, search its battery, memorize, answer."""

    def call(name: str, arguments: dict[str, Any], thinking: str) -> dict[str, Any]:
        body = json.dumps({"name": name, "arguments": arguments})
        return {"reasoning": thinking, "content": f"<tool_call>\n{body}\n</tool_call>", "chunk": 12}

    def labels(body: dict[str, Any]) -> list[str]:
        """The items the last tool response showed ("Picture 1", "Text 2", …), in order."""
        for msg in reversed(body["messages"]):
            content = msg.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            text = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text")
            if "<tool_response>" in text:
                return list(dict.fromkeys(re.findall(r"\b(?:Picture|Text|Video) \d+\b", text)))
        raise RuntimeError("the model was shown no search results")

    def memorize(summary: str, thinking: str) -> Any:
        def turn(body: dict[str, Any]) -> dict[str, Any]:
            shown = labels(body)
            best = next((x for x in shown if x.startswith("Picture")), shown[0])
            memo = [
                {
                    "information_id": x,
                    "is_useful": x == best,
                    "priority_score": 5 if x == best else 1,
                    "key_timestamp": [],
                }
                for x in shown
            ]
            return call("summarize_and_memorize", {"summarize": summary, "memorize": memo}, thinking)

        return turn

    return [
        call(
            "add_search_node",
            {
                "id": "Atlas robot specifications",
                "parent_ids": ["root"],
                "query": "Atlas robot payload capacity",
            },
            "The question is about the Atlas robot's payload and battery. Northwind's annual report should "
            "describe its flagship product; I will search for its specifications first.",
        ),
        memorize(
            "The annual report's flagship product page describes the Atlas warehouse robot and lists "
            "its specifications, payload included.",
            "Picture 1 is the annual report page about the Atlas robot, with a specification list. The "
            "other items are unrelated.",
        ),
        call(
            "add_search_node",
            {
                "id": "Atlas battery runtime",
                "parent_ids": ["Atlas robot specifications"],
                "query": "Atlas robot battery runtime hours per charge",
            },
            "I have the payload from the specification page; I will check the battery runtime with a "
            "second, more specific search.",
        ),
        memorize(
            "The same specification page gives the Atlas robot's battery runtime per charge.",
            "The page found again holds the battery figure next to the payload.",
        ),
        call(
            "add_answer_node",
            {
                "parent_ids": ["Atlas robot specifications", "Atlas battery runtime"],
                "answer": "The Atlas robot carries up to 450 kg and runs about 14 hours per charge.",
            },
            "Both figures come from the Atlas specification page: 450 kg payload, about 14 hours of "
            "battery runtime.",
        ),
    ]


# ---------------------------------------------------------------- recording


def index_sample(data_dir: Path) -> None:
    """The sample corpus indexed as the app's first launch does (corpus ``sample``, default embedder)."""
    cmd = [sys.executable, "-m", "vrag_desktop", "--data-dir", str(data_dir), "index", "--corpus", "sample"]
    subprocess.run([*cmd, "--quiet", str(SAMPLE)], check=True)


def page_size(data_dir: Path, page: int) -> tuple[int, int]:
    """Pixel size of the annual report's page render (the boxes are computed in its frame)."""
    from PIL import Image

    from vrag_desktop.core.corpus.library import Library

    corpus = Library(data_dir).open("sample")
    try:
        item = next(i for i in corpus.manifest.items() if i.name.startswith(REPORT) and i.ordinal == page)
        with Image.open(item.image_path) as im:
            return im.size
    finally:
        corpus.close()


def record(kind: str, data_dir: Path) -> Path:
    """Run one agent against the scripted server; the saved run's folder."""
    from screenshots import QUESTION, make_script
    from scripted_openai import ScriptedOpenAI

    from vrag_desktop.api import VRAG, VimRAG

    if kind == "vrag":
        assert QUESTION == VRAG_QUESTION
        script, question = make_script(page_size(data_dir, 2)), VRAG_QUESTION
    else:
        script, question = vimrag_script(), VIMRAG_QUESTION
    common: dict[str, Any] = {"search_url": None, "data_dir": data_dir, "corpora": ["sample"]}
    with ScriptedOpenAI(script) as srv:
        if kind == "vrag":
            agent: Any = VRAG(
                srv.base_url, model_name="Qwen2.5-VL-7B-VRAG", api_key=None, max_steps=6, **common
            )
        else:
            agent = VimRAG(srv.base_url, model_name="qwen3.5-plus", api_key="k", max_steps=8, **common)
        events = list(agent.run(question))
    kinds = [e.event for e in events]
    answers = [e for e in events if e.event == "answer"]
    if not answers or answers[-1].forced or "error" in kinds:
        raise SystemExit(f"make_example_runs: the {kind} run did not go as scripted: {kinds}")
    # The scripted words fit what the search really found: the revenue table is on page 2, the Atlas
    # robot's specifications on page 3 (the first picture of each VimRAG search, memorized as useful).
    want = 2 if kind == "vrag" else 3
    for results in (e for e in events if e.event == "search_results"):
        top = results.hits[0]
        if not (top.source.endswith(f"{REPORT}.pdf") and top.page == want):
            raise SystemExit(f"make_example_runs: {kind}: the search found {top.source} p. {top.page} first")
    assert agent.run_id
    return data_dir / "runs" / agent.run_id


# ---------------------------------------------------------------- making it portable


class Portable:
    """Rewrites one saved run's paths relative to its new folder, copying what lies elsewhere."""

    def __init__(self, run_dir: Path, out: Path) -> None:
        self.run_dir = run_dir.resolve()
        self.out = out
        self.images = out / "images"
        self.images.mkdir(parents=True, exist_ok=True)
        self.copied: dict[Path, str] = {}

    def relative(self, value: str) -> str:
        path = Path(value).resolve()
        if not path.is_file():
            raise SystemExit(f"make_example_runs: the run names a file that is not there: {value}")
        if path.is_relative_to(SAMPLE.resolve()):  # the corpus's own files: next to the examples
            return os.path.relpath(path, self.out.resolve())
        if path not in self.copied:  # the run's own images, and page renders of the data directory
            name = (
                path.name
                if path.is_relative_to(self.run_dir)
                else f"corpus-{path.parent.name}-{path.stem}.jpg"
            )
            self._jpeg(path, self.images / name)
            self.copied[path] = f"images/{name}"
        return self.copied[path]

    def portable(self, data: Any) -> Any:
        """An event's JSON with every path relative. A video clip the corpus derived (a hit's
        ``media``) is not shipped: its field becomes null; its contact sheet and key frames are."""
        from vrag_desktop.core.example_runs import map_paths

        def clips_out(o: Any) -> Any:
            if isinstance(o, dict):
                return {
                    k: None
                    if k == "media" and isinstance(v, str) and self._derived_video(v)
                    else clips_out(v)
                    for k, v in o.items()
                }
            return [clips_out(v) for v in o] if isinstance(o, list) else o

        return map_paths(clips_out(data), self.relative)

    @staticmethod
    def _derived_video(value: str) -> bool:
        path = Path(value).resolve()
        return not path.is_relative_to(SAMPLE.resolve()) and path.suffix.lower() in (".mp4", ".webm", ".mkv")

    @staticmethod
    def _jpeg(src: Path, dest: Path) -> None:
        """The same pixels' size, as a JPEG of modest quality (regions are in these pixels)."""
        from PIL import Image

        if dest.exists():
            raise SystemExit(f"make_example_runs: two images would be {dest.name}")
        with Image.open(src) as im:
            buf = io.BytesIO()
            im.convert("RGB").save(buf, "JPEG", quality=JPEG_QUALITY, optimize=True)
        dest.write_bytes(buf.getvalue())


def make_portable(kind: str, run_dir: Path, out: Path, forbidden: list[str]) -> None:
    if out.exists():
        shutil.rmtree(out)
    portable = Portable(run_dir, out)
    lines = []
    for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            lines.append(json.dumps(portable.portable(json.loads(line)), ensure_ascii=False))
    (out / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    meta["id"] = f"example-{kind}"
    meta["model"] = f"{meta.get('model') or 'model'} (scripted)"
    meta["settings"] = {
        k: v for k, v in dict(meta.get("settings") or {}).items() if k not in ("base_url", "search_url")
    }
    meta["settings"]["model"] = meta["model"]
    meta["example"] = {
        "title": TITLES[kind],
        "note": NOTE.format(agent="VRAG" if kind == "vrag" else "VimRAG"),
    }
    (out / "run.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for path in [out / "events.jsonl", out / "run.json"]:
        text = path.read_text(encoding="utf-8")
        left = [f for f in forbidden if f in text]
        if left or re.search(r'"(?:image|raw|source|media)": "/', text):
            raise SystemExit(f"make_example_runs: {path} still holds a path of this machine: {left}")


def check(out: Path) -> None:
    """Open each example as the app does and insist on what a newcomer must see."""
    from vrag_desktop.core.example_runs import example_events, list_examples

    found = {e.key: e for e in list_examples(out)}
    for key in ("vrag", "vimrag"):
        events = example_events(found[key])
        kinds = {e.event for e in events}
        need = {"search_results", "answer"} | (
            {"search_image", "crop_image"} if key == "vrag" else {"memorize", "graph"}
        )
        if not need <= kinds:
            raise SystemExit(f"make_example_runs: the {key} example lacks {sorted(need - kinds)}")
        for e in events:
            for name in ("image", "raw", "source"):
                value = getattr(e, name, "")
                if value and not Path(value).exists():
                    raise SystemExit(f"make_example_runs: {key}: {name} {value} does not resolve")
        size = sum(p.stat().st_size for p in found[key].folder.rglob("*") if p.is_file())
        print(f"{key}: {len(events)} events, {size / 1024:.0f} KiB in {found[key].folder}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "resources" / "example_runs"))
    ap.add_argument(
        "--data-dir", help="an existing data directory with the sample corpus indexed as 'sample'"
    )
    args = ap.parse_args()
    out = Path(args.out).resolve()
    work = Path(tempfile.mkdtemp(prefix="vrag-examples-"))
    os.environ["VRAG_DESKTOP_CONFIG_DIR"] = str(work / "config")
    os.environ["VRAG_DESKTOP_VIEW_CACHE"] = "off"  # every image the model saw stays with the run
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data_dir = Path(args.data_dir).resolve() if args.data_dir else work / "data"
    try:
        if not args.data_dir:
            index_sample(data_dir)
        forbidden = sorted({str(work), str(data_dir), str(Path.home()), tempfile.gettempdir() + "/"}, key=len)
        for kind in ("vrag", "vimrag"):
            make_portable(kind, record(kind, data_dir), out / kind, forbidden)
        check(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
