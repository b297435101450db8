"""Start, resume and export training runs: the life of a run directory in the trainer process.

Stop: SIGTERM (what the app's supervisor sends first) or a ``STOP`` file both end the run at the
next step boundary, after a checkpoint of that step, with exit code 3. A SIGKILL loses the steps
since the last complete checkpoint (``save_steps``; 1 keeps every step). A resume refuses a config
that changes anything but the resume-safe fields, naming them, and restarts from the last
*complete* checkpoint (a half-written one, from a full disk or a kill, is removed first), after
dropping what the steps it redoes left behind: their metrics rows and samples, and (TensorBoard's
``purge_step``) their events, so no step shows twice.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vrag_desktop.core.paths import resolve_data_dir
from vrag_desktop.core.training.config import TrainConfig, changed_fields
from vrag_desktop.core.training.rundir import TrainRun, TrainRunError

__all__ = ["EXIT_BAD", "EXIT_FAILED", "EXIT_OK", "EXIT_STOPPED", "RunRefused", "export", "resume", "start"]

EXIT_OK, EXIT_FAILED, EXIT_BAD, EXIT_STOPPED = 0, 1, 2, 3
log = logging.getLogger("vrag_trainer")


class RunRefused(ValueError):
    """The run cannot start as asked (bad data, a changed config on resume...): exit code 2."""


# ---- loading ------------------------------------------------------------------------------------
def device_and_dtype(cfg: TrainConfig) -> tuple[str, Any]:
    import torch

    device = cfg.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RunRefused("device: cuda was asked for but no GPU is visible")
    names = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if cfg.dtype != "auto":
        return device, names[cfg.dtype]
    if device == "cuda":
        return device, torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return device, torch.float32


def load_policy(cfg: TrainConfig, path: str | None = None, *, weights: Path | None = None) -> tuple[Any, Any]:
    """Model and processor from a local directory or a hub id (downloaded when online); ``weights``:
    the folder a warm-started run loads its weights from (``init_from``; quantized as the model
    would be), the processor still coming from the model."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    from vrag_desktop.core.embedders.base import EmbedderError
    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor, resolve_model_dir

    where = path or cfg.model
    try:
        local = resolve_model_dir(where)  # a hub id is downloaded (online) or found in the cache
    except EmbedderError as exc:
        raise RunRefused(f"model: {exc}") from exc
    if not (local / "config.json").is_file():
        raise RunRefused(f"model: {local} is not a model directory (no config.json)")
    try:
        config = AutoConfig.from_pretrained(str(local))
    except (OSError, ValueError) as exc:
        raise RunRefused(f"model: cannot read the config of {local}: {exc}") from exc
    from vrag_trainer.lora import LoraRefused, quantization

    device, dtype = device_and_dtype(cfg)
    try:
        extra = quantization(cfg, device, dtype) if path is None else {}
    except LoraRefused as exc:
        raise RunRefused(str(exc)) from exc
    try:
        model = AutoModelForImageTextToText.from_pretrained(str(weights or local), dtype=dtype, **extra)
    except ValueError as exc:
        raise RunRefused(
            f"model: {where} ({config.model_type}) is not a vision-language chat model: {exc}"
        ) from exc
    try:
        processor = load_processor(local, config.model_type)
    except (EmbedderError, OSError, ValueError) as exc:
        raise RunRefused(f"model: cannot load the processor of {local}: {exc}") from exc
    return model, processor


def save_processor(processor: Any, out: Path) -> None:
    """Tokenizer, image processor and chat template — what a serving engine needs beside the
    weights (``processor.save_pretrained`` fails without torchvision)."""
    out.mkdir(parents=True, exist_ok=True)
    processor.tokenizer.save_pretrained(out)
    processor.image_processor.save_pretrained(out)
    template = getattr(processor, "chat_template", None)
    if template:
        (out / "chat_template.jinja").write_text(template, encoding="utf-8")


# ---- logging and signals ------------------------------------------------------------------------
#: Libraries whose INFO lines are per-request chatter, kept out of the run's log (warnings still in).
QUIET_LOGGERS = ("httpx", "httpcore")


@contextlib.contextmanager
def _logging_to(run: TrainRun) -> Iterator[None]:
    """Log to stderr, and to the run's log unless the app's supervisor already captures stderr
    into it (``VRAG_TRAINER_LOG_CAPTURED``), so no line is written twice."""
    run.root.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = []
    if not os.environ.get("VRAG_TRAINER_LOG_CAPTURED"):
        handler = logging.FileHandler(run.log_path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(handler)
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    handlers.append(console)
    root = logging.getLogger()
    for h in handlers:
        root.addHandler(h)
    old = root.level
    root.setLevel(logging.INFO)
    # httpx logs every request at INFO: a line per search of the served corpora, burying the steps
    quiet = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()
        root.setLevel(old)
        for name, level in quiet.items():
            logging.getLogger(name).setLevel(level)


class _OutliveThePipe(io.TextIOBase):
    """stdout/stderr for a trainer the app launched: once the app's pipe breaks (the person quit
    and left the run going), further output is appended to the run's log instead of raising
    BrokenPipeError in the middle of a step (tqdm and logging write on every step)."""

    def __init__(self, stream: Any, log_path: Path) -> None:
        self._stream = stream
        self._log_path = log_path
        self._file: Any = None

    def _fallback(self) -> Any:
        if self._file is None:
            self._file = open(self._log_path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the process
        return self._file

    def write(self, text: str) -> int:
        if self._file is None:
            try:
                n = self._stream.write(text)
                self._stream.flush()
                return int(n or 0)
            except (BrokenPipeError, OSError, ValueError):
                pass
        f = self._fallback()
        f.write(text)
        f.flush()
        return len(text)

    def flush(self) -> None:
        target = self._file or self._stream
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            target.flush()

    def isatty(self) -> bool:
        return False


def _guard_output(run: TrainRun) -> None:
    """When the app captures our output, survive the app going away (see :class:`_OutliveThePipe`)."""
    if os.environ.get("VRAG_TRAINER_LOG_CAPTURED") and not isinstance(sys.stderr, _OutliveThePipe):
        sys.stdout = _OutliveThePipe(sys.stdout, run.log_path)
        sys.stderr = _OutliveThePipe(sys.stderr, run.log_path)


class _StopFlag:
    """SIGTERM/SIGINT set it; the step-end callback reads it (never interrupts a step)."""

    def __init__(self) -> None:
        self.set = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopFlag:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._old[sig] = signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.set and signum == signal.SIGINT:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.set = True
        log.info("stop requested (%s): the run stops after this step", signal.Signals(signum).name)

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


# ---- the run ------------------------------------------------------------------------------------
#: Builds the rollout generator from (model, processor); None: HF sampling or vLLM per the config.
GeneratorFactory = Callable[[Any, Any], Any]
#: Called after each step's rollouts with (trainer, rollouts, rows), before the update (tests, probes).
StepHook = Callable[[Any, Any, Any], None]


def start(
    cfg: TrainConfig,
    run_dir: str | None = None,
    *,
    generator: GeneratorFactory | None = None,
    on_step: StepHook | None = None,
) -> int:
    data_root = resolve_data_dir(cfg.data_dir or None)
    root = Path(run_dir).expanduser() if run_dir else cfg.resolved_output_dir(data_root)
    from vrag_desktop.core.training.plan import check_fields
    from vrag_trainer import distributed

    check_fields(cfg)  # e.g. engine: verl, which this trainer does not run (the message says what does)
    distributed.check_processes(cfg)
    from vrag_desktop.core.training.warmstart import check_init_from

    check_init_from(cfg)  # weights of another architecture: refused by name before the run exists
    try:
        run = distributed.create_run(root, cfg)  # rank 0 creates it; other processes join
    except TrainRunError as exc:
        raise RunRefused(str(exc)) from exc
    return _train(run, cfg, resuming=False, generator=generator, on_step=on_step)


def resume(
    run_dir: str,
    cfg: TrainConfig | None = None,
    *,
    generator: GeneratorFactory | None = None,
    on_step: StepHook | None = None,
) -> int:
    try:
        from vrag_trainer import distributed

        run = distributed.open_run(run_dir)
        old = run.config()
    except TrainRunError as exc:
        raise RunRefused(str(exc)) from exc
    distributed.check_processes(cfg or old)
    if cfg is not None:
        changed = changed_fields(old, cfg)
        if changed:
            raise RunRefused(
                f"resume refused: the config changes {', '.join(changed)}, which would make the run "
                "a different experiment; start a new run instead (resume may change only "
                "max_steps, save_steps, save_total_limit, samples_per_step, tensorboard, name, judge, "
                "vllm_url, validation.eval_steps, validation.max_items)"
            )
        run.replace_config(cfg)
    return _train(run, cfg or old, resuming=True, generator=generator, on_step=on_step)


def _train(
    run: TrainRun,
    cfg: TrainConfig,
    *,
    resuming: bool,
    generator: GeneratorFactory | None,
    on_step: StepHook | None = None,
) -> int:
    from vrag_desktop.core.training.learnable import answer_style, learning_warnings
    from vrag_trainer.callbacks import RunCallback
    from vrag_trainer.data import DataError, load_train_data, load_validation, serve_search
    from vrag_trainer.rewards import JudgeRefused, RunJudge
    from vrag_trainer.trl_trainer import SearchDown
    from vrag_trainer.warmstart import resume_weights

    _guard_output(run)
    with _logging_to(run), _StopFlag() as flag, contextlib.ExitStack() as stack:
        run.clear_stop()
        ckpt = None
        if resuming:
            for gone in run.remove_incomplete_checkpoints():
                log.warning(
                    "removed the incomplete checkpoint %s (a crash or a full disk cut it short)", gone
                )
            ckpt = run.last_checkpoint()
            done = ckpt.step if ckpt else 0
            run.truncate_metrics(done)  # the steps after it are redone: none may show twice
            dropped = run.remove_samples_after(done)
            if dropped:
                log.info("removed %d sample(s) of the steps after step %d (redone now)", dropped, done)
            log.info("resuming %s from %s", run.root, f"step {ckpt.step}" if ckpt else "the start")
        run.write_state(
            status="running", pid=os.getpid(), error=None, resumed_from=ckpt.step if ckpt else None
        )
        data_root = resolve_data_dir(cfg.data_dir or None)
        try:
            if cfg.algorithm == "sft":  # the supervised warm start: fixed trajectories, no rollouts
                from vrag_trainer.sft import build_sft

                trainer = build_sft(run, cfg, data_root, lambda: flag.set, resume=resume_weights(ckpt))
            else:
                data = load_train_data(cfg, data_root)
                for line in data.lines():
                    log.info("%s", line)
                for warning in learning_warnings(cfg, answer_style(data.items)):
                    log.warning("warning: %s", warning)  # the words the New-run dialog and the CLI show
                split = load_validation(cfg, data_root, data)  # a split holds items out of `data`: said
                if split is not None:
                    data = split.train
                    for line in split.lines():
                        log.info("%s", line)
                url = cfg.search_url
                if not url:
                    url, stop_search = serve_search(data_root, data.corpora)
                    stack.callback(stop_search)
                    log.info("serving the corpora for the rollouts at %s", url)
                judge = RunJudge(cfg.judge, data_root)
                trainer = _build(run, cfg, data, url, judge, flag, generator, on_step, resume_weights(ckpt))
                if split is not None:  # after _build: it validates the trainer's own policy and judge
                    from vrag_trainer.validation import ValidationCallback

                    trainer.add_callback(ValidationCallback(trainer, run, cfg, split))
                stack.callback(trainer.search_client.close)
                stack.callback(trainer._loop.close)  # last: callbacks run in reverse order
                stack.callback(lambda: _close_generator(trainer))
                stack.callback(lambda: trainer._loop.run_until_complete(judge.aclose()))
            if cfg.tensorboard:  # a resume purges the events of the steps it redoes
                _purging_tensorboard(trainer, run, (ckpt.step if ckpt else 0) + 1 if resuming else None)
            trainer.train(resume_from_checkpoint=str(ckpt.path) if ckpt else None)
            _finish_processes()
        except (DataError, RunRefused) as exc:
            run.write_state(status="failed", error=str(exc))
            log.error("%s", exc)
            return EXIT_BAD
        except (SearchDown, JudgeRefused) as exc:
            run.write_state(status="stopped", error=str(exc))
            log.error("%s", exc)
            return EXIT_STOPPED
        except RunCallback.NaNLoss as exc:
            run.write_state(status="failed", error=str(exc))
            log.error("%s", exc)
            return EXIT_FAILED
        except KeyboardInterrupt:
            run.write_state(status="stopped", error="interrupted")
            return EXIT_STOPPED
        except Exception as exc:  # a full disk (safetensors raises its own type), OOM, a bug
            from vrag_desktop.core.training.preflight import disk_full

            full = disk_full(exc, run.root)
            if full:  # the failed save's partial files: they would leave no room for the state file
                run.remove_incomplete_checkpoints()
            last = run.last_checkpoint()
            kept = f"the last complete checkpoint (step {last.step}) is kept" if last else "no checkpoint yet"
            what = "the disk is full" if full else f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(OSError):  # the state file may not fit on a full disk either
                run.write_state(
                    status="failed", error=f"{what}; {kept}: {exc}" if full else f"{what}; {kept}"
                )
            log.error("the run failed: %s; %s; resume when fixed", what, kept, exc_info=not full)
            return EXIT_FAILED
        step = int(trainer.state.global_step)
        stopped = flag.set or run.stop_requested()
        run.write_state(status="stopped" if stopped else "finished", step=step, pid=None)
        log.info("%s at step %d", "stopped" if stopped else "finished", step)
        return EXIT_STOPPED if stopped else EXIT_OK


def _build(
    run: TrainRun,
    cfg: TrainConfig,
    data: Any,
    url: str,
    judge: Any,
    flag: _StopFlag,
    generator: GeneratorFactory | None,
    on_step: StepHook | None = None,
    resume: Path | None = None,
) -> Any:
    import torch
    from datasets import Dataset as HFDataset  # type: ignore[import-untyped]

    from vrag_desktop.core.agents.searchers import HttpSearcher
    from vrag_desktop.core.eval.reward import RewardWeights
    from vrag_trainer.callbacks import RunCallback
    from vrag_trainer.generation import HFGenerator
    from vrag_trainer.policy import Limits
    from vrag_trainer.rollout import RolloutSpec
    from vrag_trainer.trl_trainer import AgentGRPOTrainer, grpo_args
    from vrag_trainer.warmstart import load_start, skip_trainer_load

    torch.manual_seed(cfg.seed)
    device, dtype = device_and_dtype(cfg)
    model, processor = load_start(cfg, run, dtype, resume)
    rows = [
        {"prompt": [{"role": "user", "content": it.query}], "index": i} for i, it in enumerate(data.items)
    ]
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(run.tensorboard)  # this run's, not an earlier one's
    args = grpo_args(
        cfg,
        str(run.checkpoints),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        use_cpu=device == "cpu",
        bf16=dtype == torch.bfloat16,
        logging_dir=str(run.tensorboard),
    )
    limits = Limits(cfg.max_model_len, cfg.max_response_length, cfg.max_images, cfg.max_prompt_length)
    weights = RewardWeights(cfg.reward.judge, cfg.reward.format, cfg.reward.ndcg)

    searcher = HttpSearcher(url)  # shared by every rollout: one connection pool

    def make_spec(trainer: Any) -> RolloutSpec:
        policy = trainer.accelerator.unwrap_model(trainer.model)
        if generator is not None:
            gen: Any = generator(policy, processor)
        elif cfg.generator == "vllm" and cfg.vllm_mode == "app_server":
            from vrag_trainer.vllm_http import ServerGenerator

            gen = ServerGenerator(
                trainer, cfg.vllm_url, run.root / "vllm-adapters", name=run.root.name, processor=processor
            )
        elif cfg.generator == "vllm":
            from vrag_trainer.generation import VLLMGenerator

            gen = VLLMGenerator(trainer)
        else:
            gen = HFGenerator(policy, processor)
        return RolloutSpec(
            cfg.agent,
            processor,
            gen,
            lambda: searcher,
            limits,
            max_turns=cfg.max_turns,
            top_k=cfg.search_top_k,
            temperature=cfg.temperature,
            weights=weights,
        )

    callback = RunCallback(run, cfg, processor, lambda: flag.set)
    peft: Any = None
    if cfg.lora.enabled:
        from vrag_trainer.lora import LoraRefused, peft_config

        try:
            peft = peft_config(model, cfg.lora)
        except LoraRefused as exc:
            raise RunRefused(str(exc)) from exc
    trainer = AgentGRPOTrainer(
        model=model,
        args=args,
        train_dataset=HFDataset.from_list(rows),
        processing_class=processor.tokenizer,
        callbacks=[callback],
        run_config=cfg,
        items=data.items,
        golden=data.golden,
        make_spec=make_spec,
        judge=judge,
        samples_dir=run.samples,
        on_step=on_step,
        peft_config=peft,
    )
    if resume is not None:
        skip_trainer_load(trainer)
    if peft is not None:
        wrapped: Any = trainer.model
        n = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
        log.info("LoRA: %d adapter parameters train (rank %d); the base is frozen", n, cfg.lora.rank)
    trainer.search_client = searcher
    return trainer


def _purging_tensorboard(trainer: Any, run: TrainRun, purge_step: int | None) -> None:
    """Swap HF's TensorBoard callback for one whose writer purges from ``purge_step`` (see
    :class:`vrag_trainer.callbacks.PurgingTensorBoard`)."""
    from transformers.integrations import TensorBoardCallback

    from vrag_trainer.callbacks import PurgingTensorBoard

    trainer.remove_callback(TensorBoardCallback)
    trainer.add_callback(PurgingTensorBoard(run.tensorboard, purge_step))


def _close_generator(trainer: Any) -> None:
    """Close an HTTP rollout client (vllm_http) on the trainer's loop, if one was made."""
    gen = getattr(trainer._spec, "generator", None) if trainer._spec is not None else None
    close = getattr(gen, "aclose", None)
    if close is not None and not trainer._loop.is_closed():
        trainer._loop.run_until_complete(close())


def _finish_processes() -> None:
    from vrag_trainer import distributed

    distributed.finish()


# ---- export -------------------------------------------------------------------------------------
def export(run_dir: str, out: str | None = None, *, merged: bool = True, best: bool = False) -> Path:
    """The last complete checkpoint (``best``: the best validation's) as a model folder a vLLM
    server can load (see :func:`vrag_trainer.exporting.export`)."""
    from vrag_trainer.exporting import export as _export

    return _export(run_dir, out, merged=merged, best=best)


def _finite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))
