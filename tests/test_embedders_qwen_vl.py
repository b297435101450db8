"""Qwen3-VL-Embedding and GVE embedders, run for real on tiny random checkpoints built offline."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vrag_desktop.core.embedders.base import EmbedderError, EmbedInput, pick_dtype
from vrag_desktop.core.embedders.qwen_vl import GVEEmbedder, Qwen3VLEmbedder
from vrag_desktop.core.embedders.qwen_vl_inputs import (
    GVE_FAMILY,
    GVE_LIMITS,
    QWEN3_LIMITS,
    QWEN3_VL_FAMILY,
    _sample_indices,
    detect_family,
    last_token_pool,
    smart_resize,
)

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).parent))
import tiny_vl_models

# Tiny pixel budgets (2×3 merged patches at most) keep the vision towers cheap on 2 CPU cores;
# CPU (fp32) everywhere, so batch/single comparisons hold to 1e-4 on GPU machines too.
SMALL: dict[str, dict[str, Any]] = {
    GVE_FAMILY: dict(
        device="cpu", min_pixels=4 * 28 * 28, max_pixels=6 * 28 * 28, frame_max_pixels=4 * 28 * 28
    ),
    QWEN3_VL_FAMILY: dict(
        device="cpu", min_pixels=4 * 32 * 32, max_pixels=6 * 32 * 32, frame_max_pixels=4 * 32 * 32
    ),
}
CLASSES = {GVE_FAMILY: GVEEmbedder, QWEN3_VL_FAMILY: Qwen3VLEmbedder}


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Any:
    """Tiny models run fastest on one thread; OpenMP spinning hurts on a busy 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny_vl")
    return {
        GVE_FAMILY: tiny_vl_models.build_tiny_qwen25_vl(root / "tiny-gve"),
        QWEN3_VL_FAMILY: tiny_vl_models.build_tiny_qwen3_vl(root / "tiny-qwen3-vl-embedding"),
        "qwen2_vl": tiny_vl_models.build_tiny_qwen2_vl(root / "tiny-qwen2-vl"),
    }


@pytest.fixture(scope="module")
def embedders(model_dirs: dict[str, Path]) -> dict[str, Any]:
    return {fam: CLASSES[fam](str(model_dirs[fam]), batch_size=16, **SMALL[fam]) for fam in CLASSES}


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from PIL import Image

    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    paths = []
    for i, (w, h) in enumerate([(64, 48), (48, 64), (64, 48), (80, 40), (64, 64)]):
        p = root / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    # An RGBA image, so alpha flattening is exercised too.
    rgba = root / "alpha.png"
    Image.fromarray(rng.integers(0, 255, (48, 64, 4), dtype=np.uint8), "RGBA").save(rgba)
    paths.append(rgba)
    return paths


def _items(images: list[Path]) -> list[EmbedInput]:
    return [
        EmbedInput(kind="text", text="The quick brown fox jumps over the lazy dog."),
        EmbedInput(kind="image", image_path=images[0]),
        EmbedInput(kind="text", text="revenue table"),
        EmbedInput(kind="video", frames=images[1:4], timestamps=[0.0, 1.0, 2.0]),
        EmbedInput(kind="image", image_path=images[4]),
        EmbedInput(kind="image", image_path=images[5]),
        EmbedInput(kind="text", text=""),
    ]


def _stack(rows: list[np.ndarray]) -> np.ndarray:
    assert all(r.shape[0] == 1 for r in rows)
    return np.concatenate(rows)


def _check_unit_rows(x: np.ndarray, dim: int) -> None:
    assert x.dtype == np.float32
    assert x.shape[1] == dim
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


# ------------------------------------------------------------------ pure helpers


def test_last_token_pool_right_and_left_padding() -> None:
    import torch

    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    out = last_token_pool(hidden, right)
    assert torch.equal(out[0], hidden[0, 1])
    assert torch.equal(out[1], hidden[1, 3])
    left = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1]])
    out = last_token_pool(hidden, left)
    assert torch.equal(out[0], hidden[0, 3])
    assert torch.equal(out[1], hidden[1, 3])
    single = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 1]])
    out = last_token_pool(hidden, single)
    assert torch.equal(out[0], hidden[0, 0])
    assert torch.equal(out[1], hidden[1, 3])


def test_smart_resize_bounds_and_factor() -> None:
    for h, w in [(48, 64), (1000, 700), (10, 10), (3000, 4000), (28, 2000)]:
        rh, rw = smart_resize(h, w, 28, 3136, 200_704)
        assert rh % 28 == 0 and rw % 28 == 0
        assert 3136 <= rh * rw <= 200_704
    with pytest.raises(ValueError):
        smart_resize(10, 5000, 28, 3136, 200_704)


def test_sample_indices_caps_and_spreads() -> None:
    assert _sample_indices(3, 8) == [0, 1, 2]
    picked = _sample_indices(100, 8)
    assert len(picked) == 8 and picked[0] == 0 and picked[-1] == 99 and picked == sorted(picked)
    assert _sample_indices(5, 1) == [0]


def test_detect_family_by_name() -> None:
    assert detect_family("Qwen/Qwen3-VL-Embedding-2B") == QWEN3_VL_FAMILY
    assert detect_family("/models/QWEN3_VL_EMBEDDING_8b") == QWEN3_VL_FAMILY
    assert detect_family("my-qwen3-vl-finetune") == QWEN3_VL_FAMILY
    assert detect_family("Alibaba-NLP/GVE-7B") == GVE_FAMILY
    assert detect_family("gve-3b") == GVE_FAMILY
    assert detect_family("sentence-transformers/all-MiniLM-L6-v2") is None
    assert detect_family("Qwen/Qwen2.5-VL-3B-Instruct") is None


def test_detect_family_by_config(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    # Copies under neutral names, so only config.json can tell.
    for source, expected in [
        (GVE_FAMILY, GVE_FAMILY),
        (QWEN3_VL_FAMILY, QWEN3_VL_FAMILY),
        ("qwen2_vl", None),
    ]:
        neutral = tmp_path / f"model_{source}"
        neutral.mkdir()
        shutil.copy(model_dirs[source] / "config.json", neutral / "config.json")
        assert detect_family(str(neutral)) == expected
    assert detect_family(str(model_dirs[GVE_FAMILY])) == GVE_FAMILY
    assert detect_family(str(model_dirs[QWEN3_VL_FAMILY])) == QWEN3_VL_FAMILY
    assert detect_family(str(tmp_path / "nothing-here")) is None


def test_module_import_is_light() -> None:
    code = (
        "import sys, vrag_desktop.core.embedders.qwen_vl as m; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


# ------------------------------------------------------------------ both families, real loaders


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_info(family: str, embedders: dict[str, Any], model_dirs: dict[str, Path]) -> None:
    e = embedders[family]
    info = e.info
    assert info.dim == 64
    assert info.id == f"{family}:{model_dirs[family].name.lower()}:64"
    assert info.modalities == frozenset({"text", "image", "video"})
    assert info.render_pixels == SMALL[family]["max_pixels"] == info.max_pixels
    assert info.min_pixels == SMALL[family]["min_pixels"]
    assert e.device == "cpu" and info.extra["dtype"] == "float32"


def test_reference_sizes_of_both_families() -> None:
    """The numbers each family's reference code states (Qwen3-VL-Embedding: MIN_PIXELS, MAX_PIXELS,
    FRAME_MAX_PIXELS, MAX_TOTAL_PIXELS, MAX_FRAMES, FPS, MAX_LENGTH; GVE: its processor's bounds and
    8 frames); GVE has no shared video budget, so that keyword is refused for it."""
    assert QWEN3_LIMITS == {
        "min_pixels": 4_096,
        "max_pixels": 1_843_200,
        "max_length": 8192,
        "fps": 1.0,
        "max_frames": 64,
        "frame_max_pixels": 786_432,
        "video_total_pixels": 7_864_320,
    }
    assert GVE_LIMITS == {
        "min_pixels": 3_136,
        "max_pixels": 200_704,
        "max_length": 8192,
        "fps": 1.0,
        "max_frames": 8,
        "frame_max_pixels": 156_800,
    }
    with pytest.raises(TypeError, match="video_total_pixels"):
        GVEEmbedder("/no/such/model", device="cpu", video_total_pixels=10)


def test_default_pixel_bounds(model_dirs: dict[str, Path]) -> None:
    gve = GVEEmbedder(str(model_dirs[GVE_FAMILY]), device="cpu")
    assert gve.info.render_pixels == 200_704 and gve.info.min_pixels == 3_136
    qwen = Qwen3VLEmbedder(str(model_dirs[QWEN3_VL_FAMILY]), device="cpu")
    assert qwen.info.render_pixels == 1_843_200 and qwen.info.min_pixels == 4_096


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_queries(family: str, embedders: dict[str, Any]) -> None:
    e = embedders[family]
    queries = ["what does the chart show?", "a red sofa", "", "what does the chart show?"]
    q = e.embed_queries(queries)
    assert q.shape == (4, 64)
    _check_unit_rows(q, 64)
    np.testing.assert_allclose(q[0], q[3], atol=1e-6)  # deterministic within a batch
    np.testing.assert_allclose(e.embed_queries(queries[:1])[0], q[0], atol=1e-4)  # and alone
    assert not np.allclose(q[0], q[1], atol=1e-3)
    assert e.embed_queries([]).shape == (0, 64)
    batch_size = e.batch_size
    try:
        e.batch_size = 3  # queries are chunked too
        np.testing.assert_allclose(e.embed_queries(queries), q, atol=1e-4)
    finally:
        e.batch_size = batch_size


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_items_batch_equals_one_by_one(family: str, embedders: dict[str, Any], images: list[Path]) -> None:
    e = embedders[family]
    items = _items(images)
    batch = _stack(e.embed_items(items))
    assert batch.shape == (len(items), 64)
    _check_unit_rows(batch, 64)
    single = np.concatenate([_stack(e.embed_items([it])) for it in items])
    np.testing.assert_allclose(batch, single, atol=1e-4)
    again = _stack(e.embed_items(items))
    np.testing.assert_allclose(batch, again, atol=1e-6)
    # Different inputs, different vectors (text vs text, image vs image, image vs video).
    for a, b in [(0, 2), (1, 4), (1, 3), (4, 5)]:
        assert not np.allclose(batch[a], batch[b], atol=1e-3), (a, b)
    assert e.embed_items([]) == []


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_small_batch_size_chunks_the_same(
    family: str, model_dirs: dict[str, Path], images: list[Path]
) -> None:
    e = CLASSES[family](str(model_dirs[family]), batch_size=2, **SMALL[family])
    items = _items(images)
    chunked = _stack(e.embed_items(items))
    whole = _stack(
        CLASSES[family](str(model_dirs[family]), batch_size=32, **SMALL[family]).embed_items(items)
    )
    np.testing.assert_allclose(chunked, whole, atol=1e-4)


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_left_padding_pools_the_same(family: str, model_dirs: dict[str, Path], images: list[Path]) -> None:
    e = CLASSES[family](str(model_dirs[family]), **SMALL[family])
    items = _items(images)[:3]
    right = _stack(e.embed_items(items))
    e._processor.tokenizer.padding_side = "left"
    left = _stack(e.embed_items(items))
    np.testing.assert_allclose(left, right, atol=1e-4)


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_broken_image_names_the_file(
    family: str, embedders: dict[str, Any], images: list[Path], tmp_path: Path
) -> None:
    e = embedders[family]
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    with pytest.raises(EmbedderError, match=r"broken\.png"):
        e.embed_items(
            [
                EmbedInput(kind="image", image_path=images[0]),
                EmbedInput(kind="image", image_path=broken),
            ]
        )
    with pytest.raises(EmbedderError, match=r"missing\.jpg"):
        e.embed_items([EmbedInput(kind="image", image_path=tmp_path / "missing.jpg")])
    with pytest.raises(EmbedderError, match=r"broken\.png"):
        e.embed_items([EmbedInput(kind="video", frames=[images[0], broken])])
    # The embedder still works afterwards.
    assert e.embed_items([EmbedInput(kind="image", image_path=images[0])])[0].shape == (1, 64)


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_video_frames_are_capped(family: str, model_dirs: dict[str, Path], images: list[Path]) -> None:
    e = CLASSES[family](str(model_dirs[family]), max_frames=4, **SMALL[family])
    many = [images[i % 5] for i in range(12)]
    vec = e.embed_items([EmbedInput(kind="video", frames=many, timestamps=[float(i) for i in range(12)])])
    assert vec[0].shape == (1, 64)
    prepared = e._prepare_item(EmbedInput(kind="video", frames=many))
    frames = prepared.video if prepared.video is not None else prepared.images
    assert len(frames) == 4
    assert len({im.size for im in frames}) == 1  # frames of differing sizes are brought to one


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_video_path_with_a_video_processor(
    family: str, model_dirs: dict[str, Path], images: list[Path]
) -> None:
    """With a video processor (torchvision machines), keyframes go in as one video."""
    e = CLASSES[family](str(model_dirs[family]), **SMALL[family])
    stand_in = tiny_vl_models.FrameListVideoProcessor(e._processor.image_processor)
    e._processor.video_processor = stand_in
    items = _items(images)
    batch = _stack(e.embed_items(items))
    assert e.info.extra["video_mode"] == "video"
    _check_unit_rows(batch, 64)
    single = np.concatenate([_stack(e.embed_items([it])) for it in items])
    np.testing.assert_allclose(batch, single, atol=1e-4)
    call = stand_in.calls[-1]
    assert call["do_resize"] is False and call["do_sample_frames"] is False
    assert len(call["video_metadata"]) == 1 and call["video_metadata"][0]["fps"] == 1.0
    # Same frames as a video and as separate images give different vectors.
    as_images = _stack(CLASSES[family](str(model_dirs[family]), **SMALL[family]).embed_items(items[3:4]))
    assert not np.allclose(as_images[0], batch[3], atol=1e-3)


def test_unusable_video_processor_falls_back_to_images(
    model_dirs: dict[str, Path], images: list[Path]
) -> None:
    """A video processor that cannot take frame lists is detected once, up front, not per item."""

    class Broken:
        merge_size = 2
        temporal_patch_size = 2

        def __call__(self, videos: Any, **kwargs: Any) -> Any:
            raise TypeError("frame lists not supported")

    e = GVEEmbedder(str(model_dirs[GVE_FAMILY]), **SMALL[GVE_FAMILY])
    e._processor.video_processor = Broken()
    vec = e.embed_items([EmbedInput(kind="video", frames=images[1:4])])
    assert vec[0].shape == (1, 64)
    assert e.info.extra["video_mode"] == "frames-as-images"


def test_frames_fall_back_to_images_without_torchvision(
    embedders: dict[str, Any], images: list[Path]
) -> None:
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision present: the real video processor is used")
    for e in embedders.values():
        assert e._processor.video_processor is None
        vec = e.embed_items([EmbedInput(kind="video", frames=images[1:3])])
        assert vec[0].shape == (1, 64)
        assert e.info.extra["video_mode"] == "frames-as-images"


# ------------------------------------------------------------------ family specifics


def test_qwen3_instructions(
    model_dirs: dict[str, Path], embedders: dict[str, Any], images: list[Path]
) -> None:
    d = str(model_dirs[QWEN3_VL_FAMILY])
    base = embedders[QWEN3_VL_FAMILY]
    assert base.instruction == "Represent the user's input."
    custom_query = Qwen3VLEmbedder(
        d, query_instruction="Find the page that answers the question", **SMALL[QWEN3_VL_FAMILY]
    )
    assert custom_query.query_instruction.endswith("question.")
    assert custom_query.info.id == base.info.id  # documents unchanged: same vector space
    q = "what is shown?"
    assert not np.allclose(custom_query.embed_queries([q]), base.embed_queries([q]), atol=1e-3)
    item = [EmbedInput(kind="image", image_path=images[0])]
    np.testing.assert_allclose(custom_query.embed_items(item)[0], base.embed_items(item)[0], atol=1e-5)
    custom_doc = Qwen3VLEmbedder(d, instruction="Represent this page!", **SMALL[QWEN3_VL_FAMILY])
    assert custom_doc.instruction == "Represent this page!"  # already punctuated
    assert custom_doc.info.id != base.info.id


def test_qwen3_conversation_format(embedders: dict[str, Any]) -> None:
    e = embedders[QWEN3_VL_FAMILY]
    text = e._render(e._query_conversation(""))
    assert "<|im_start|>system\nRepresent the user's input.<|im_end|>" in text
    assert "<|im_start|>user\nNULL<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    conv = e._item_conversation(EmbedInput(kind="video", text="caption"), 2, True)
    assert [p["type"] for p in conv[1]["content"]] == [
        "video",
        "image",
        "image",
    ]  # item text left out
    # Empty text item embeds as "NULL", like an empty query.
    np.testing.assert_allclose(
        e.embed_items([EmbedInput(kind="text", text="")])[0][0], e.embed_queries([""])[0], atol=1e-5
    )


def test_gve_conversation_format(embedders: dict[str, Any]) -> None:
    e = embedders[GVE_FAMILY]
    text = e._render(e._query_conversation("hello"))
    assert text == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    # Queries take the same path as text items.
    np.testing.assert_allclose(
        e.embed_queries(["hello"])[0],
        e.embed_items([EmbedInput(kind="text", text="hello")])[0][0],
        atol=1e-5,
    )


def test_wrong_model_type_is_refused(model_dirs: dict[str, Path]) -> None:
    with pytest.raises(EmbedderError, match="qwen3_vl"):
        GVEEmbedder(str(model_dirs[QWEN3_VL_FAMILY]))
    with pytest.raises(EmbedderError, match="qwen2_vl"):
        Qwen3VLEmbedder(str(model_dirs["qwen2_vl"]))


def test_dtype_names_and_bad_dtype(model_dirs: dict[str, Path]) -> None:
    import torch

    assert pick_dtype(None, "cpu") is torch.float32 and pick_dtype("auto", "cpu") is torch.float32
    assert (
        pick_dtype("half", "cpu") is torch.float16 and pick_dtype("torch.bfloat16", "cpu") is torch.bfloat16
    )
    assert pick_dtype(torch.float16, "cuda") is torch.float16
    with pytest.raises(ValueError, match="must be a string or a torch dtype"):
        pick_dtype(16, "cpu")
    with pytest.raises(EmbedderError, match="unknown dtype 'float8'"):
        GVEEmbedder(str(model_dirs[GVE_FAMILY]), device="cpu", dtype="float8")
    e = GVEEmbedder(str(model_dirs[GVE_FAMILY]), device="cpu", dtype="fp16")
    assert e.info.extra["dtype"] == "float16"


@pytest.mark.parametrize("family", [GVE_FAMILY, QWEN3_VL_FAMILY])
def test_conditional_generation_layout_loads(family: str, tmp_path: Path) -> None:
    """Hub checkpoints often carry the generation head: the base model loads them whole."""
    build = {
        GVE_FAMILY: tiny_vl_models.build_tiny_qwen25_vl,
        QWEN3_VL_FAMILY: tiny_vl_models.build_tiny_qwen3_vl,
    }[family]
    d = build(tmp_path / "with-head", seed=1, with_lm_head=True)
    e = CLASSES[family](str(d), **SMALL[family])
    _check_unit_rows(e.embed_queries(["hello"]), 64)


def test_checkpoint_with_missing_weights_is_refused(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    d = tmp_path / "gve-without-vision"
    shutil.copytree(model_dirs[GVE_FAMILY], d)
    weights = load_file(d / "model.safetensors")
    kept = {k: v for k, v in weights.items() if "visual" not in k}
    assert len(kept) < len(weights)
    save_file(kept, d / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(EmbedderError, match="missing"):
        GVEEmbedder(str(d), **SMALL[GVE_FAMILY])


def test_info_id_names(tmp_path: Path) -> None:
    from vrag_desktop.core.embedders.qwen_vl_inputs import _model_name

    assert _model_name("Qwen/Qwen3-VL-Embedding-2B") == "qwen3-vl-embedding-2b"
    assert _model_name("/models/Qwen3-VL-Embedding-2B/") == "qwen3-vl-embedding-2b"
    snapshot = "/c/hub/models--Alibaba-NLP--GVE-3B/snapshots/0123abcd"
    assert _model_name(snapshot) == "gve-3b"


def test_missing_local_dir(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="not found"):
        GVEEmbedder(str(tmp_path / "no-such-model"))


def test_cached_hub_id_offline(
    monkeypatch: pytest.MonkeyPatch, model_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """A hub id already in the local cache loads offline, under the same id as a local copy."""
    import huggingface_hub.constants as hub_constants

    cache = tmp_path / "hub-cache"
    repo = cache / "models--vrag-tests--tiny-gve"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    shutil.copytree(model_dirs[GVE_FAMILY], repo / "snapshots" / ("0" * 40))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)
    e = GVEEmbedder("vrag-tests/tiny-gve", **SMALL[GVE_FAMILY])
    assert e.info.id == "gve:tiny-gve:64" == GVEEmbedder(str(model_dirs[GVE_FAMILY]), device="cpu").info.id
    _check_unit_rows(e.embed_queries(["hello"]), 64)


def test_uncached_hub_id_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub.constants as hub_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.chdir(tmp_path)  # so the id cannot be mistaken for a local directory
    with pytest.raises(EmbedderError) as err:
        Qwen3VLEmbedder("vrag-tests/Qwen3-VL-Embedding-not-cached")
    message = str(err.value)
    assert "could not download" in message and "local directory" in message
    assert "vrag-tests/Qwen3-VL-Embedding-not-cached" in message
