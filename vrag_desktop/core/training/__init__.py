"""What the app, the CLI and the trainer process share about training runs, without any training
library: the validated config (:mod:`.config`) and the run directory's layout (:mod:`.rundir`)."""

from vrag_desktop.core.training.config import ConfigError, TrainConfig, load_config
from vrag_desktop.core.training.rundir import TrainRun, TrainRunError

__all__ = ["ConfigError", "TrainConfig", "TrainRun", "TrainRunError", "load_config"]
