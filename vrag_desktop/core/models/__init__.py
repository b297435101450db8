"""Models as part of the app: a catalogue, "fits this machine" verdicts, downloads that resume and
are checked, the models folder (``<data>/models``), and the hub settings (mirror, token, offline).

The Models view and ``vrag-desktop models`` are both built on these names; importing this package
is cheap (``huggingface_hub`` loads only when something goes to the network).
"""

from __future__ import annotations

from vrag_desktop.core.models.catalogue import (
    CatalogueEntry,
    catalogue,
    check_model_folder,
    entry_from_folder,
    find_entry,
    human_bytes,
)
from vrag_desktop.core.models.download import DownloadProgress, PullResult, inspect_remote, pull, sized_entry
from vrag_desktop.core.models.errors import (
    AccessError,
    ChecksumError,
    DiskSpaceError,
    ModelBusyError,
    ModelError,
    ModelNotFoundError,
    NetworkError,
    NotAModelError,
    OfflineError,
)
from vrag_desktop.core.models.fit import Fit, Machine, Verdict, disk_fit, fits, free_bytes, probe_machine
from vrag_desktop.core.models.listing import ModelRow, list_models
from vrag_desktop.core.models.settings import (
    ModelSettings,
    forget_token,
    load_settings,
    save_settings,
    set_token,
    stored_token,
    update_settings,
)
from vrag_desktop.core.models.store import InstalledModel, ModelStore, PartialDownload

__all__ = [
    "AccessError",
    "CatalogueEntry",
    "ChecksumError",
    "DiskSpaceError",
    "DownloadProgress",
    "Fit",
    "InstalledModel",
    "Machine",
    "ModelBusyError",
    "ModelError",
    "ModelNotFoundError",
    "ModelRow",
    "ModelSettings",
    "ModelStore",
    "NetworkError",
    "NotAModelError",
    "OfflineError",
    "PartialDownload",
    "PullResult",
    "Verdict",
    "catalogue",
    "check_model_folder",
    "disk_fit",
    "entry_from_folder",
    "find_entry",
    "fits",
    "forget_token",
    "free_bytes",
    "human_bytes",
    "inspect_remote",
    "list_models",
    "load_settings",
    "probe_machine",
    "pull",
    "save_settings",
    "set_token",
    "sized_entry",
    "stored_token",
    "update_settings",
]
