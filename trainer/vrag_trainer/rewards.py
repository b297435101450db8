"""The answer judge of a training run, from its :class:`~vrag_desktop.core.training.config.JudgeConfig`.

A model judge is the evaluation's :class:`~vrag_desktop.core.eval.judge.Judge` (retries, backoff,
verdict parsing) on an endpoint profile or URL; ``exact`` and ``anls`` are the evaluation's
metrics. A failed verdict (timeout, junk reply after the retries) is returned as ``None`` and
counted by the trainer — the reward counts it as wrong, the step goes on. A judge that refuses
every call (bad key, unknown model) raises :class:`JudgeRefused`: every reward would be wrong.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vrag_desktop.core.eval.answers import anls, exact_match
from vrag_desktop.core.training.config import JudgeConfig

__all__ = ["JudgeRefused", "RunJudge"]


class JudgeRefused(RuntimeError):
    """The judge endpoint refuses every call; training would learn from wrong rewards."""


class RunJudge:
    """``await judge(query, reference, answer) -> (correct | None, error | None)``."""

    def __init__(self, config: JudgeConfig, data_root: Path | None = None) -> None:
        self.config = config
        self.data_root = data_root
        self._judge: Any = None
        self.calls = 0
        self.failures = 0

    def _model_judge(self) -> Any:
        from vrag_desktop.core.eval.judge import Judge
        from vrag_desktop.core.run.assemble import Endpoint

        c = self.config
        if c.kind == "url":
            key = os.environ.get(c.api_key_env) if c.api_key_env else None
            endpoint = Endpoint.from_url(c.base_url, c.model, key)
        else:
            from vrag_desktop.core.endpoints.profiles import ProfileStore
            from vrag_desktop.core.paths import DataLayout

            layout = DataLayout.resolve(self.data_root)
            endpoint = Endpoint.from_profile(ProfileStore(layout.config), c.profile, c.model or None)
        return Judge(endpoint, timeout_s=c.timeout, retries=c.retries, concurrency=c.workers)

    async def __call__(
        self, query: str, reference: str, answer: str | None
    ) -> tuple[bool | None, str | None]:
        c = self.config
        self.calls += 1
        if c.kind == "exact":
            return exact_match(answer, reference) >= 1.0, None
        if c.kind == "anls":
            return anls(answer, reference) >= c.anls_threshold, None
        if self._judge is None:
            self._judge = self._model_judge()
        verdict = await self._judge.verdict(query, reference, answer)
        if verdict.refused:
            raise JudgeRefused(f"the judge refuses every call: {verdict.error}")
        if verdict.correct is None and answer is not None:
            self.failures += 1
        return verdict.correct, verdict.error

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()
            self._judge = None
