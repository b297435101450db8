"""Training beyond one machine on verl (Ray + FSDP + vLLM rollout servers), pinned to verl 0.9.1.

The same rollouts, rewards and GGPO masks as the one-workstation trainer, plugged into verl's own
extension points rather than a fork of its trainer: an agent loop (:mod:`.agent_loop`) drives the
project's agents through :class:`~vrag_trainer.policy.PolicyChat` over verl's rollout servers; a
registered policy loss and advantage estimator (:mod:`.loss`) implement GGPO; :mod:`.config` turns a
:class:`~vrag_desktop.core.training.config.TrainConfig` into verl's config, data and launch scripts.

verl is imported lazily: it needs transformers < 5.11 while the app uses 5.2x, so it lives only in
a cluster's environment; everything here that does not call verl runs (and is tested) without it.
"""

__all__ = ["VERL_VERSION"]

#: The verl release these extension points were written against.
VERL_VERSION = "0.9.1"
