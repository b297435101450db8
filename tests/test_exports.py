"""Exports the original's trainers read, from real saved runs: agents run against a scripted model
over real HTTP and real indexes, ground truth from a dataset file, files read back with pyarrow."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, index_paths
from PIL import Image, ImageDraw
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.datasets import (
    AmbiguousQuestion,
    Dataset,
    DatasetError,
    DatasetItem,
    load_dataset,
    match_run,
    write_unified,
)
from vrag_desktop.core.run.export import ExportError, ExportRefused, export_rl, export_sft
from vrag_desktop.core.run.store import RunStore

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

#: The reference's §3.1 text, typed out here rather than imported: the export must match the
#: original's training copies byte for byte ("as your want" included, no trailing newline).
ORIGINAL_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and user will return the searched results. Every time you retrieve an image, "
    "you have the option to crop it to obtain a clearer view, the format for coordinates is "
    "<bbox>[x1, y1, x2, y2]</bbox>. You can search as many times as your want. If you find no further "
    "external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without "
    "detailed illustrations. For example, <answer> Beijing </answer>. Question: {question}"
)
Q_ATLAS = "How heavy a load can the Atlas robot carry?"
Q_POSTER = "What colour is the robot on the warehouse poster?"
VRAG_SCRIPT = [
    {"content": "<think>I need the spec page.</think>\n<search>Atlas robot payload</search>"},
    {"content": "<think>Zoom into the table.</think>\n<bbox>[20, 30, 300, 200]</bbox>"},
    {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
]
POSTER_SCRIPT = [
    {"content": "<think>Find the poster.</think>\n<search>warehouse robot poster</search>"},
    {"content": "<think>The robot is orange.</think>\n<answer>orange</answer>"},
]
# Reference answers differ from what the scripted agent says: the ground truth must be the dataset's.
DATASET = {
    "examples": [
        {
            "uid": "atlas-1",
            "query": Q_ATLAS,
            "reference_answer": "450 kg payload",
            "meta_info": {
                "file_name": "robots.pdf",
                "reference_page": [2],
                "source_type": ["Text", "Table"],
                "query_type": "Single-Hop_Single-Span",
                "doc_type": "Report",
                "answer_format": "Str",
            },
        },
        {
            "uid": "poster-1",
            "query": Q_POSTER,
            "reference_answer": "bright orange",
            "meta_info": {
                "file_name": "poster.png",
                "reference_page": [],
                "source_type": "Image",
                "query_type": "Single-Hop",
            },
        },
    ]
}


@dataclass
class Saved:
    data: Path
    store: RunStore
    vrag: str  # VRAG over a PDF corpus: search, crop, answer
    vimrag: str  # VimRAG over the same corpus
    poster: str  # VRAG over an image-only corpus
    limited: str  # VRAG with one step: answered after being told to; reasoning on its own channel
    limited_bodies: list[dict[str, Any]]
    vrag_bodies: list[dict[str, Any]]
    vimrag_bodies: list[dict[str, Any]]
    dataset: Path


def _pdf(path: Path, pages: list[str]) -> Path:
    import pymupdf

    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=12)
    doc.save(str(path))
    doc.close()
    return path


def _picture(path: Path, colour: tuple[int, int, int]) -> None:
    img = Image.new("RGB", (900, 640), "white")
    ImageDraw.Draw(img).rectangle([200, 150, 700, 500], fill=colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Saved:
    from vrag_desktop import VRAG, VimRAG
    from vrag_desktop.core.corpus.library import Library

    root = tmp_path_factory.mktemp("exports")
    data = root / "data"
    library = Library(data)
    pdf = _pdf(
        root / "docs" / "robots.pdf",
        [
            "Northwind annual report. Letter to shareholders about a good year.",
            "Atlas warehouse robot specifications: payload 450 kg, battery 14 hours, top speed 2 m/s.",
            "Safety: seven minor incidents, no injuries.",
        ],
    )
    index_paths(library, "docs", [pdf], minilm)
    _picture(root / "pictures" / "poster.png", (255, 120, 0))
    index_paths(library, "pics", [root / "pictures"], minilm, ocr=False)

    def vrag(
        script: list[dict[str, Any]], corpus: str, question: str, **kw: Any
    ) -> tuple[str, list[dict[str, Any]]]:
        with ScriptedOpenAI(script) as srv:
            agent = VRAG(
                base_url=srv.base_url, search_url=None, model_name="m", corpora=[corpus], data_dir=data, **kw
            )
            events = list(agent.run(question))
            bodies = srv.chat_bodies
        assert events[-1]["event"] == "answer" and not events[-1]["forced"], events[-1]
        assert agent.run_id is not None
        return agent.run_id, bodies

    vrag_id, vrag_bodies = vrag(VRAG_SCRIPT, "docs", Q_ATLAS)
    poster_id, _ = vrag(POSTER_SCRIPT, "pics", Q_POSTER)
    limited_script = [
        {"reasoning": "I need the spec page.", "content": "<search>Atlas robot payload</search>"},
        {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
    ]
    limited_id, limited_bodies = vrag(limited_script, "docs", Q_ATLAS, max_steps=1)
    turns = json.loads(Path(__file__).with_name("data").joinpath("vimrag_turns.json").read_text())
    with ScriptedOpenAI(turns) as srv:
        vim = VimRAG(
            base_url=srv.base_url,
            search_url=None,
            model_name="m",
            corpora=["docs"],
            data_dir=data,
            search_top_k=2,
        )
        events = list(vim.run({"query": Q_ATLAS}))
        vimrag_bodies = srv.chat_bodies
    assert events[-1]["event"] == "answer" and vim.run_id is not None
    dataset = root / "rag_dataset.json"
    dataset.write_text(json.dumps(DATASET, indent=2))
    store = RunStore(data / "runs")
    return Saved(
        data,
        store,
        vrag_id,
        vim.run_id,
        poster_id,
        limited_id,
        limited_bodies,
        vrag_bodies,
        vimrag_bodies,
        dataset,
    )


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content if p["type"] == "text")


# ------------------------------------------------------------------ RL parquet
def test_rl_parquet_has_the_originals_fields_and_types(saved: Saved, tmp_path: Path) -> None:
    out = tmp_path / "rl" / "train.parquet"
    report = export_rl(saved.store, [saved.vrag, saved.vimrag, saved.poster], saved.dataset, out)
    assert report.exported == [saved.vrag, saved.vimrag, saved.poster] and not report.unlabelled
    table = pq.read_table(out)
    pages = pa.list_(pa.int64())
    assert table.schema.names == [
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
        "file_name",
        "reference_page",
    ]
    types = {f.name: f.type for f in table.schema}
    assert types["data_source"] == pa.string() and types["ability"] == pa.string()
    assert types["prompt"] == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    assert types["reward_model"] == pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
    assert types["extra_info"] == pa.struct(
        [
            ("split", pa.string()),
            ("index", pa.int64()),
            ("answer", pa.string()),
            ("question", pa.string()),
            ("content_type", pa.string()),
            ("reason_type", pa.string()),
            ("file_name", pa.string()),
            ("reference_page", pages),
        ]
    )
    assert types["file_name"] == pa.string() and types["reference_page"] == pages
    vrag, vimrag, poster = table.to_pylist()

    # VRAG: one user turn, the training copy of the prompt, byte for byte
    assert vrag["prompt"] == [{"role": "user", "content": ORIGINAL_PROMPT.replace("{question}", Q_ATLAS)}]
    sent = _text(saved.vrag_bodies[0]["messages"][0])  # what the agent sent: the demo's copy (+ "\n")
    assert sent == vrag["prompt"][0]["content"] + "\n"
    assert vrag["data_source"] == "rag" and vrag["ability"] == "math"
    # ground truth is the dataset's reference answer, not the agent's "450 kg"
    assert vrag["reward_model"] == {"style": "rule", "ground_truth": "450 kg payload"}
    assert vrag["extra_info"] == {
        "split": "train",
        "index": 0,
        "answer": "450 kg payload",
        "question": Q_ATLAS,
        "content_type": "Text####Table",
        "reason_type": "Single-Hop_Single-Span",
        "file_name": "robots.pdf",
        "reference_page": [2],
    }
    assert vrag["file_name"] == "robots.pdf" and vrag["reference_page"] == [2]

    # VimRAG: the system and user messages a VimRAG run starts with, exactly as the model got them
    first = saved.vimrag_bodies[0]["messages"]
    assert [m["role"] for m in vimrag["prompt"]] == ["system", "user"]
    assert vimrag["prompt"][0]["content"] == _text(first[0]) and "add_search_node" in _text(first[0])
    assert vimrag["prompt"][1]["content"] == _text(first[1])
    assert vimrag["prompt"][1]["content"].startswith(f"### Question\n{Q_ATLAS}\n\n### Agent Action Graph\n")
    assert "Answer the given question" not in json.dumps(vimrag["prompt"])
    assert vimrag["reward_model"]["ground_truth"] == "450 kg payload" and vimrag["extra_info"]["index"] == 1

    # image-only corpus: the file name is the image's, never empty
    assert poster["file_name"] == "poster.png" and poster["extra_info"]["file_name"] == "poster.png"
    assert poster["reference_page"] == [] and poster["extra_info"]["content_type"] == "Image"
    shown = next(e for e in saved.store.events(saved.poster) if e["event"] == "search_image")
    assert Path(shown["source"]).name == poster["file_name"] and shown["page"] is None


def test_rl_jsonl_holds_the_same_rows(saved: Saved, tmp_path: Path) -> None:
    ids = [saved.vrag, saved.poster]
    export_rl(saved.store, ids, saved.dataset, tmp_path / "a.parquet", data_source="vidoseek", split="test")
    export_rl(
        saved.store,
        ids,
        saved.dataset,
        tmp_path / "a.jsonl",
        data_source="vidoseek",
        split="test",
        jsonl=True,
    )
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert rows == pq.read_table(tmp_path / "a.parquet").to_pylist()
    assert {r["data_source"] for r in rows} == {"vidoseek"} and {r["extra_info"]["split"] for r in rows} == {
        "test"
    }
    with pytest.raises(
        ExportError, match="'slidevqa_train' is not one the original's reward manager accepts"
    ):
        export_rl(saved.store, ids, saved.dataset, tmp_path / "b.parquet", data_source="slidevqa_train")
    assert not (tmp_path / "b.parquet").exists()


def test_runs_without_labels_are_refused_by_name(saved: Saved, tmp_path: Path) -> None:
    only_poster = tmp_path / "poster.jsonl"
    only_poster.write_text(json.dumps(DATASET["examples"][1]) + "\n")
    out = tmp_path / "rl.parquet"
    with pytest.raises(ExportRefused) as refused:
        export_rl(saved.store, [saved.vrag, saved.vimrag, saved.poster], only_poster, out)
    assert set(refused.value.runs) == {saved.vrag, saved.vimrag}
    msg = str(refused.value)
    assert saved.vrag in msg and saved.vimrag in msg and "poster.jsonl" in msg and "How heavy" in msg
    assert not out.exists()
    with pytest.raises(ExportRefused):
        export_sft(saved.store, [saved.vrag], only_poster, tmp_path / "sft.json")
    assert not (tmp_path / "sft.json").exists() and not (tmp_path / "sft_images").exists()

    report = export_rl(saved.store, [saved.vrag, saved.poster], only_poster, out, skip_unlabelled=True)
    assert report.exported == [saved.poster] and [rid for rid, _ in report.unlabelled] == [saved.vrag]
    assert pq.read_table(out).num_rows == 1 and "Left out 1 unlabelled run(s)" in "\n".join(report.lines())
    with pytest.raises(ExportError, match="nothing written"):
        export_rl(saved.store, [saved.vrag], only_poster, tmp_path / "none.parquet", skip_unlabelled=True)
    assert not (tmp_path / "none.parquet").exists()

    # a label without the reference document cannot feed the trainer's NDCG reward
    no_file = tmp_path / "nofile.jsonl"
    no_file.write_text(json.dumps({"uid": 7, "query": Q_ATLAS, "reference_answer": "450 kg"}) + "\n")
    with pytest.raises(ExportRefused, match=r"no meta_info\.file_name"):
        export_rl(saved.store, [saved.vrag], no_file, tmp_path / "x.parquet")


# ------------------------------------------------------------------ SFT
def test_sft_samples_carry_the_images_the_model_saw(saved: Saved, tmp_path: Path) -> None:
    out = tmp_path / "llamafactory" / "vrag_sft.json"
    report = export_sft(saved.store, [saved.vrag, saved.vimrag, saved.poster], saved.dataset, out)
    assert report.exported == [saved.vrag, saved.poster]
    assert report.skipped == [(saved.vimrag, "a vimrag run; SFT samples use the VRAG protocol")]
    samples = json.loads(out.read_text())
    by_id = {s["id"]: s for s in samples}
    atlas = by_id[saved.vrag]
    assert atlas["messages"][0] == {"role": "user", "content": ORIGINAL_PROMPT.replace("{question}", Q_ATLAS)}
    assert [m["role"] for m in atlas["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert [m["content"] for m in atlas["messages"][1::2]] == [t["content"] for t in VRAG_SCRIPT]
    shown = [e for e in saved.store.events(saved.vrag) if e["event"] in ("search_image", "crop_image")]
    for sample in samples:
        tags = sum(m["content"].count("<image>") for m in sample["messages"])
        assert tags == len(sample["images"]) and tags > 0
        assert all(m["content"] == "<image>" for m in sample["messages"][2::2])
        for rel in sample["images"]:
            assert not Path(rel).is_absolute() and (out.parent / rel).is_file()
    assert len(atlas["images"]) == len(shown) == 2
    for rel, ev in zip(atlas["images"], shown, strict=True):
        copied = out.parent / rel
        assert (
            hashlib.sha256(copied.read_bytes()).digest()
            == hashlib.sha256(Path(ev["image"]).read_bytes()).digest()
        )
        with Image.open(copied) as im:  # the model's resolution, not the raw page
            assert im.size == (ev["width"], ev["height"]) and im.width * im.height <= 512 * 28 * 28
    assert report.images == 3 and len(list((out.parent / "vrag_sft_images").iterdir())) == 3


def test_sft_turns_are_what_the_model_wrote_and_was_told(saved: Saved, tmp_path: Path) -> None:
    """Reasoning streamed on its own channel goes back inside <think>; the step limit's reminder
    stays in the observation turn it was sent in."""
    out = tmp_path / "limited.json"
    export_sft(saved.store, [saved.limited], saved.dataset, out)
    (sample,) = json.loads(out.read_text())
    messages = sample["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert (
        messages[1]["content"] == "<think>I need the spec page.</think>\n<search>Atlas robot payload</search>"
    )
    told = saved.limited_bodies[1]["messages"][2]  # the observation the model got after its search
    assert messages[2]["content"] == "<image>" + _text(told) and "please answer the question now" in _text(
        told
    )
    assert len(sample["images"]) == 1


def test_sft_refuses_when_nothing_is_exportable(saved: Saved, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="SFT samples use the VRAG protocol"):
        export_sft(saved.store, [saved.vimrag], saved.dataset, tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()


# ------------------------------------------------------------------ the dataset file
def test_unified_and_json_lines_read_the_same_and_round_trip(saved: Saved, tmp_path: Path) -> None:
    unified = load_dataset(saved.dataset)
    lines = tmp_path / "d.jsonl"
    lines.write_text("\n".join(json.dumps(e) for e in DATASET["examples"]) + "\n\n")
    assert load_dataset(lines).items == unified.items
    lines.rename(tmp_path / "d.json")  # JSON lines under a .json name: told apart by content
    assert load_dataset(tmp_path / "d.json").items == unified.items
    atlas = unified.items[0]
    assert atlas.reference_page == (2,) and atlas.source_type == ("Text", "Table") and atlas.uid == "atlas-1"
    again = tmp_path / "out" / "copy.json"
    write_unified(again, unified)
    assert json.loads(again.read_text()) == {
        "examples": [
            {**DATASET["examples"][0]},
            {
                **DATASET["examples"][1],
                "meta_info": {**DATASET["examples"][1]["meta_info"], "doc_type": "", "answer_format": ""},
            },
        ]
    }
    assert load_dataset(again).items == unified.items

    assert match_run(unified, "  How heavy a load\ncan the  Atlas robot carry? ") is atlas
    assert match_run(unified, "how heavy a load can the atlas robot carry?") is None  # case matters
    assert match_run(atlas, Q_ATLAS) is atlas and match_run(atlas, Q_POSTER) is None
    same = DatasetItem(
        uid="dup",
        query=Q_ATLAS,
        reference_answer="450 kg payload",
        file_name="robots.pdf",
        reference_page=(2,),
    )
    assert match_run(Dataset([atlas, same]), Q_ATLAS) is atlas  # same label twice is one label
    other = DatasetItem(uid="x", query=Q_ATLAS, reference_answer="500 kg", file_name="robots.pdf")
    with pytest.raises(AmbiguousQuestion, match="'atlas-1', 'x'"):
        match_run([atlas, other], Q_ATLAS)


def _examples(*examples: dict[str, Any]) -> str:
    return json.dumps({"examples": list(examples)})


_OK = {"uid": "a", "query": "q", "reference_answer": "x"}
BAD_DATASETS = [
    ("empty.json", "  \n", "the file is empty"),
    ("trunc.json", '{"examples": [{"uid": 1, "query": "q"', "not JSON (line 1"),
    ("list.json", "[1, 2]", "holds a list; expected the unified form"),
    ("notlist.json", '{"examples": {"uid": 1}}', '"examples" must be a list'),
    ("noquery.json", _examples({"uid": "a", "reference_answer": "x"}), 'example 1 (uid a): "query" must be'),
    ("noanswer.json", _examples({**_OK, "reference_answer": ""}), '"reference_answer" must be'),
    (
        "page0.json",
        _examples(
            {"query": "q", "reference_answer": "x"},
            {"uid": "b", "query": "q2", "reference_answer": "y", "meta_info": {"reference_page": [0]}},
        ),
        'example 2 (uid b): "meta_info.reference_page" must be a list of page numbers counted from 1 '
        "(is the dataset 0-based?), got [0]",
    ),
    ("pagestr.json", _examples({**_OK, "meta_info": {"reference_page": "3"}}), "reference_page"),
    (
        "source.json",
        _examples({**_OK, "meta_info": {"source_type": 5}}),
        '"meta_info.source_type" must be a string or a list of strings',
    ),
    ("meta.json", _examples({**_OK, "meta_info": "p.pdf"}), '"meta_info" must be an object'),
    ("dup.json", _examples(_OK, {**_OK, "query": "r"}), "examples 1 and 2 share the uid 'a'"),
    ("bad.jsonl", json.dumps(_OK) + '\n{"uid": "b", "query": \n', "bad.jsonl:2: not a JSON object"),
    ("arr.jsonl", json.dumps(_OK) + "\n[1]\n", "arr.jsonl:2: an example must be a JSON object"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_DATASETS, ids=[b[0] for b in BAD_DATASETS])
def test_a_malformed_dataset_is_a_clear_error(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_missing_dataset_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read the dataset"):
        load_dataset(tmp_path / "nope.json")


# ------------------------------------------------------------------ the command line
def test_cli_export(saved: Saved, tmp_path: Path) -> None:
    out = tmp_path / "rl.parquet"
    args = ("runs", "export", saved.vrag, saved.poster, "--format", "rl", "--dataset", str(saved.dataset))
    proc = cli(*args, "--out", str(out), data_dir=saved.data, check=True)
    assert f"Exported 2 record(s) to {out}" in proc.stdout
    assert pq.read_table(out).column("file_name").to_pylist() == ["robots.pdf", "poster.png"]

    only_poster = tmp_path / "poster.jsonl"
    only_poster.write_text(json.dumps(DATASET["examples"][1]) + "\n")
    base = (
        "runs",
        "export",
        "--format",
        "sft",
        "--dataset",
        str(only_poster),
        "--out",
        str(tmp_path / "s.json"),
    )
    proc = cli(*base, data_dir=saved.data)
    assert proc.returncode == 1 and saved.vrag in proc.stderr and "--skip-unlabelled" in proc.stderr
    assert not (tmp_path / "s.json").exists()
    proc = cli(*base, "--skip-unlabelled", data_dir=saved.data, check=True)
    assert (
        "Exported 1 sample(s)" in proc.stdout and "unlabelled" in proc.stdout and "vimrag run" in proc.stdout
    )
    assert len(json.loads((tmp_path / "s.json").read_text())) == 1

    broken = tmp_path / "broken.json"
    broken.write_text('{"examples": [{"query": "q"}]}')
    proc = cli(
        "runs",
        "export",
        "--format",
        "rl-jsonl",
        "--dataset",
        str(broken),
        "--out",
        str(tmp_path / "r.jsonl"),
        data_dir=saved.data,
    )
    assert (
        proc.returncode == 1
        and '"reference_answer" must be' in proc.stderr
        and "Traceback" not in proc.stderr
    )
    assert not (tmp_path / "r.jsonl").exists()


def test_a_dataset_exports_as_verl_rows_that_read_back(tmp_path: Path) -> None:
    """Training data straight from a dataset (no runs): the original's columns, read back with
    pyarrow and again as a dataset with the same labels; items without a file name refused by uid."""
    import pyarrow.parquet as pq

    from vrag_desktop.core.datasets import DatasetItem
    from vrag_desktop.core.datasets.store import DatasetStore, DatasetStoreError
    from vrag_desktop.core.run.export import ExportError, export_dataset_rl

    items = [
        DatasetItem(
            "a", "How heavy a load can Atlas carry?", "450 kg", "robots.pdf", (2,), query_type="fact"
        ),
        DatasetItem(
            "b",
            "Who signed the letter?",
            "Maren Alvarez",
            "report.pdf",
            (1, 3),
            source_type=("text", "table"),
        ),
    ]
    out = tmp_path / "train.parquet"
    assert export_dataset_rl(items, out) == 2
    rows = pq.read_table(out).to_pylist()
    assert [r["extra_info"]["question"] for r in rows] == [i.query for i in items]
    assert rows[1]["reward_model"] == {"style": "rule", "ground_truth": "Maren Alvarez"}
    assert rows[1]["reference_page"] == [1, 3] and rows[1]["extra_info"]["content_type"] == "text####table"
    assert rows[0]["prompt"][0]["role"] == "user" and items[0].query in rows[0]["prompt"][0]["content"]
    back = load_dataset(out)
    assert [(i.query, i.reference_answer, i.file_name, i.reference_page) for i in back] == [
        (i.query, i.reference_answer, i.file_name, i.reference_page) for i in items
    ]
    with pytest.raises(ExportError, match=r"no meta_info\.file_name.*: c"):
        export_dataset_rl([DatasetItem("c", "q", "r")], tmp_path / "bad.parquet")
    assert not (tmp_path / "bad.parquet").exists()
    store = DatasetStore(tmp_path / "datasets")
    store.create("gold")
    for i in items:
        store.add_item("gold", i)
    store.export("gold", tmp_path / "gold.parquet", "parquet")
    assert pq.read_table(tmp_path / "gold.parquet").num_rows == 2
    store.add_item("gold", DatasetItem("c", "q", "r"))
    with pytest.raises(DatasetStoreError, match="as training data"):
        store.export("gold", tmp_path / "gold2.parquet", "parquet")
