"""The models folder's errors: one class per thing a person can act on, each with its sentence.

Why classes and not one error with a code: the Models view offers a different next step for each
(set a token, turn offline mode off, free space, pick another folder), and the CLI prints the
message as one line.
"""

from __future__ import annotations


class ModelError(RuntimeError):
    """A model could not be listed, fetched, checked or removed; the message says what to do."""


class OfflineError(ModelError):
    """Offline mode is on: nothing touches the network."""


class NetworkError(ModelError):
    """The hub (or the mirror) cannot be reached: connection refused, no DNS, timed out, dropped."""


class ModelNotFoundError(ModelError):
    """No such repository (404 / 401 "RepoNotFound"), or a revision it does not have."""


class AccessError(ModelError):
    """The repository is gated or private and the token is missing, refused or without access."""


class NotAModelError(ModelError):
    """A local folder that is not a model (no ``config.json`` or no weights)."""


class DiskSpaceError(ModelError):
    """Not enough free space before a download, or the disk filled during one."""


class ChecksumError(ModelError):
    """A downloaded file's bytes do not match the hub's checksum; the file was discarded."""


class ModelBusyError(ModelError):
    """Another download of the same model is running (this process or another)."""
