"""Run inside verl's own environment (``.venv-verl``) by ``test_verl_real.py``: compose the config
``vrag_trainer verl`` generates with verl's own Hydra defaults, check what verl reads from it, and
construct our agent loops as verl's ``AgentLoopWorker`` does (``hydra.utils.instantiate`` of the
``agent_loops.yaml`` entries), then run one VRAG rollout through the constructed loop against a
scripted rollout server. Prints one JSON object (the test's evidence) as its last line.

Usage: ``python verl_real_probe.py WORKDIR SEARCH_URL``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


class ScriptedServer:
    """verl's rollout-server client, scripted: one fixed answer per call."""

    def __init__(self, tokenizer: Any, reply: str) -> None:
        self.tok, self.reply, self.calls = tokenizer, reply, 0

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
    ) -> Any:
        self.calls += 1
        ids = [*self.tok.encode(self.reply, add_special_tokens=False), self.tok.eos_token_id]
        return SimpleNamespace(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def _processor(model: Path) -> Any:
    """The tiny model's processor. verl pins transformers < 5.11, whose ``AutoImageProcessor``
    needs torchvision (the CPU build comes only from PyTorch's index); without it, the PIL image
    processor is built directly, as the app's loader does for video."""
    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor

    try:
        return load_processor(model, "qwen2_vl")
    except ImportError:
        from transformers import AutoTokenizer, Qwen2VLProcessor
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        class _NoVideo(Qwen2VLProcessor):  # type: ignore[misc]
            def check_argument_for_proper_class(self, name: str, argument: Any) -> Any:
                return None if argument is None else super().check_argument_for_proper_class(name, argument)

        tok = AutoTokenizer.from_pretrained(str(model))
        image = Qwen2VLImageProcessorPil.from_pretrained(str(model))
        return _NoVideo(
            image_processor=image, tokenizer=tok, video_processor=None, chat_template=tok.chat_template
        )


def main(work: Path, search_url: str) -> dict[str, Any]:
    import hydra
    import tiny_vl_models
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop import agent_loop as verl_loop
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from vrag_trainer.verl import agent_loop as ours
    from vrag_trainer.verl import config as vc

    from vrag_desktop.core.training.config import JudgeConfig, TrainConfig

    out: dict[str, Any] = {}
    model = tiny_vl_models.build_tiny_qwen2_vl(work / "tiny-qwen2-vl", with_lm_head=True)
    cfg = TrainConfig(
        model=str(model), dataset="d.json", search_url=search_url, judge=JudgeConfig(kind="exact")
    )
    run = work / "run"
    vdir = run / "verl"
    vdir.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    settings = vc.verl_settings(cfg, run, train_file=vdir / "train.parquet", config_file=run / "config.json")
    (vdir / "verl_ppo.yaml").write_text(vc.yaml_text(settings))
    (vdir / "agent_loops.yaml").write_text(vc.agent_loops_yaml())
    # 1. compose: verl's ppo_trainer defaults, then ours (what main_ppo --config-path/--config-name does)
    with initialize_config_dir(config_dir=str(vdir), version_base=None):
        conf = compose(config_name="verl_ppo")
    resolved = OmegaConf.to_container(conf, resolve=True)
    assert isinstance(resolved, dict)
    a, r = conf.actor_rollout_ref.actor, conf.actor_rollout_ref.rollout
    out["ours"] = {
        "n": r.n,
        "lr": a.optim.lr,
        "kl_loss_type": a.kl_loss_type,
        "limit_images": r.limit_images,
        "agent": r.agent.default_agent_loop,
        "adv_estimator": conf.algorithm.adv_estimator,
    }
    out["verl_defaults"] = {  # keys we never set: they can only come from verl's ppo_trainer.yaml
        "strategy": a.strategy,
        "critic_present": "critic" in conf,
        "reward_present": "reward_model" in conf or "reward" in conf,
        "total_keys": len(OmegaConf.to_container(conf, resolve=False)),  # type: ignore[arg-type]
    }
    # 2. our registrations, done by importing the external lib (as VERL_USE_EXTERNAL_MODULES does)
    out["registered"] = {
        "agent_loops": sorted(
            k for k in verl_loop._agent_loop_registry if k in ("vrag_agent", "vimrag_agent")
        ),
        "ggpo_loss": "ggpo" in POLICY_LOSS_REGISTRY,
        "segment_grpo": "segment_grpo" in ADV_ESTIMATOR_REGISTRY,
    }
    # 3. construct the agent loops as AgentLoopWorker does
    processor = _processor(model)
    registry = {c.name: c for c in OmegaConf.load(vdir / "agent_loops.yaml")}
    server = ScriptedServer(processor.tokenizer, "<answer>42 million dollars</answer>")
    built = {}
    for name in ("vrag_agent", "vimrag_agent"):
        loop = hydra.utils.instantiate(
            config=registry[name],
            trainer_config=verl_loop.DictConfigWrap(config=conf),
            server_manager=server,
            tokenizer=processor.tokenizer,
            processor=processor,
            hf_model_type="qwen2_vl",
            dataset_cls=RLHFDataset,
            data_config=verl_loop.DictConfigWrap(conf.data),
            tools=verl_loop.ToolListWrap([]),
        )
        assert isinstance(loop, verl_loop.AgentLoopBase)
        built[name] = type(loop).__qualname__
    out["constructed"] = built
    # 4. one VRAG rollout through the constructed loop (scripted server, the real search server)
    loop = hydra.utils.instantiate(
        config=registry["vrag_agent"],
        trainer_config=verl_loop.DictConfigWrap(config=conf),
        server_manager=server,
        tokenizer=processor.tokenizer,
        processor=processor,
        hf_model_type="qwen2_vl",
        dataset_cls=RLHFDataset,
        data_config=verl_loop.DictConfigWrap(conf.data),
        tools=verl_loop.ToolListWrap([]),
    )
    row = {
        "extra_info": {
            "question": "What was the revenue of Alpha Corp in 2023?",
            "answer": "42 million dollars",
            "index": 3,
        },
        "reward_model": {"ground_truth": "42 million dollars"},
        "file_name": "alpha.pdf",
        "reference_page": [1],
        "raw_prompt": [],
    }
    output = asyncio.run(loop.run({"temperature": 1.0, "top_p": 1.0}, **row))
    out["rollout"] = {
        "type": type(output).__name__,
        "server_calls": server.calls,
        "response_len": len(output.response_ids),
        "mask_sum": int(sum(output.response_mask)),
        "reward": output.reward_score,
        "context_built": ours._CONTEXT is not None,
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2])))
