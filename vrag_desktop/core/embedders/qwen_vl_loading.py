"""Loading a Qwen-VL embedding checkpoint's files: the model directory (local, or a cached hub
snapshot) and its processor, which must also load without torchvision (no video processor)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from vrag_desktop.core.embedders.base import EmbedderError

__all__ = ["check_weights", "load_processor", "resolve_model_dir"]

log = logging.getLogger(__name__)

_HUB_PATTERNS = ["*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken", "*.safetensors"]


def resolve_model_dir(spec: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """A local directory holding the model: ``spec`` itself, what ``vrag-desktop models pull`` put in
    ``data_dir``'s models folder (None: the default data directory), or the hub snapshot of ``spec``.

    Hub ids only work online or when already cached; otherwise the user is told how to pass a local
    directory instead (the app never needs the network once a model is on disk).
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    looks_like_path = path.is_absolute() or spec.startswith((".", "~")) or spec.count("/") > 1 or "\\" in spec
    if looks_like_path or path.exists():
        raise EmbedderError(f"model directory not found: {spec}")
    pulled, offline = _models_folder(spec, data_dir)
    if pulled is not None:
        return pulled
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError as exc:  # pragma: no cover - a transformers dependency
        raise EmbedderError(f"cannot fetch {spec!r}: huggingface_hub is not installed") from exc
    try:
        return Path(snapshot_download(spec, allow_patterns=_HUB_PATTERNS, local_files_only=bool(offline)))
    except GatedRepoError as exc:
        raise EmbedderError(
            f"model {spec!r} is gated on the Hugging Face Hub: accept its terms there and log in "
            "(`hf auth login`), or pass a local directory path"
        ) from exc
    except RepositoryNotFoundError as exc:
        raise EmbedderError(
            f"no model {spec!r} on the Hugging Face Hub, and no local directory of that name"
        ) from exc
    except Exception as exc:
        if offline:
            raise EmbedderError(
                f"could not download model {spec!r}: {offline}, and it is not in the models folder. Pull it "
                f"first: `vrag-desktop models pull {spec}` (or Models in the app), or pass a local directory "
                "path instead of the hub id"
            ) from exc
        raise EmbedderError(
            f"could not download model {spec!r} from the Hugging Face Hub (offline, or not in the "
            f"local cache: {type(exc).__name__}). Download it once on a machine with internet, "
            f"e.g. `hf download {spec} --local-dir /path/to/{spec.split('/')[-1]}`, and pass that "
            "local directory path instead of the hub id."
        ) from exc


def _models_folder(spec: str, data_dir: str | os.PathLike[str] | None) -> tuple[Path | None, str | None]:
    """``(folder, offline reason)``: the folder ``vrag-desktop models pull`` made for hub id ``spec``
    in ``data_dir`` (None: ``$VRAG_DESKTOP_DATA_DIR`` or the default), and why the network is off."""
    from vrag_desktop.core.models.settings import load_settings
    from vrag_desktop.core.models.store import ModelStore
    from vrag_desktop.core.paths import DataLayout

    layout = DataLayout.resolve(data_dir)
    return ModelStore(layout).downloaded_path(spec), load_settings(layout).offline_reason()


def _read_chat_template(model_dir: Path, tokenizer: Any) -> str | None:
    """The checkpoint's chat template, wherever this checkpoint keeps it."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    for name in ("chat_template.json", "processor_config.json"):
        try:
            template = json.loads((model_dir / name).read_text(encoding="utf-8")).get("chat_template")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(template, str):
            return template
    template = getattr(tokenizer, "chat_template", None)
    return template if isinstance(template, str) else None


def _processor_without_video(model_type: str, model_dir: Path) -> Any:
    """Build the Qwen-VL processor from its parts, with no video processor.

    Why: in transformers 5.x every Qwen-VL video processor needs torchvision, so without it
    ``AutoProcessor.from_pretrained`` raises ImportError, and passing ``video_processor=None`` to
    the processor class fails its argument type check (AttributeError on
    ``VIDEO_PROCESSOR_MAPPING``). A subclass skips that check for a None argument only; the PIL
    image processor, tokenizer and chat template are loaded on their own. Videos are then embedded
    as multiple images (see :meth:`_QwenVLEmbedder._video_as_video`).
    """
    import transformers
    from transformers import AutoImageProcessor, AutoTokenizer

    base_name = {
        "qwen3_vl": "Qwen3VLProcessor",
        "qwen2_5_vl": "Qwen2_5_VLProcessor",
        "qwen2_vl": "Qwen2VLProcessor",
    }.get(model_type)
    if base_name is None:
        raise EmbedderError(f"unsupported model type {model_type!r} in {model_dir}")
    base = getattr(transformers, base_name)

    class _ProcessorWithoutVideo(base):  # type: ignore[misc, valid-type]
        def check_argument_for_proper_class(self, argument_name: str, argument: Any) -> Any:
            if argument is None:
                return None
            return super().check_argument_for_proper_class(argument_name, argument)

    _ProcessorWithoutVideo.__name__ = base.__name__  # keep the processor's own name in logs/reprs
    image_processor = AutoImageProcessor.from_pretrained(str(model_dir))
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    return _ProcessorWithoutVideo(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=None,
        chat_template=_read_chat_template(model_dir, tokenizer),
    )


def first_sentence(exc: BaseException) -> str:
    """What went wrong, in one line: transformers' missing-library errors go on for six lines of
    installation advice that, in a training run's log, read like a failure."""
    text = " ".join(str(exc).split())
    head = text.partition(". ")[0].rstrip(".")
    return head or type(exc).__name__


def load_processor(model_dir: Path, model_type: str) -> Any:
    """``AutoProcessor`` when it works (torchvision present), else a build without video."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(str(model_dir))
        if not hasattr(processor, "image_processor"):  # a bare tokenizer: no processor config
            raise AttributeError(f"AutoProcessor gave a {type(processor).__name__}")
    except (ImportError, AttributeError) as exc:
        log.info(
            "AutoProcessor unavailable for %s (%s); building it without a video processor (images work)",
            model_dir,
            first_sentence(exc),
        )
        processor = _processor_without_video(model_type, model_dir)
    if getattr(processor, "chat_template", None) is None:
        processor.chat_template = _read_chat_template(model_dir, processor.tokenizer)
    if processor.chat_template is None:
        raise EmbedderError(f"{model_dir} has no chat template (chat_template.jinja / tokenizer_config.json)")
    # Right padding, as the references use; pooling copes with left padding anyway.
    processor.tokenizer.padding_side = "right"
    return processor


def check_weights(loading_info: dict[str, Any], spec: str, family: str) -> None:
    """Refuse a checkpoint that leaves weights uninitialised: its vectors would be noise.

    Both checkpoint layouts in use (``Qwen*VLForConditionalGeneration`` with ``lm_head``, and
    the embedding wrappers around ``Qwen*VLModel``) load into the base model with nothing
    missing; an unused ``lm_head`` is merely unexpected and harmless.
    """
    missing = sorted(loading_info.get("missing_keys") or [])
    if missing:
        raise EmbedderError(
            f"{spec}: {len(missing)} weights are missing from the checkpoint "
            f"(e.g. {', '.join(missing[:3])}); is this a complete {family} model?"
        )
