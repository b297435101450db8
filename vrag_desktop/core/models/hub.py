"""Talking to the Hugging Face Hub (or a mirror) through ``huggingface_hub``: a repository's file
list with checksums, one file's bytes with resume, and every failure turned into a sentence.

Why ``http_get`` and not ``hf_hub_download``: since huggingface_hub 1.x each download goes to a
process-unique temporary file that is deleted when the download fails (huggingface_hub PR #4228),
so nothing survives a crash, a ``kill -9`` or a pause. ``http_get`` is the library's own transfer
(its session, ``HF_ENDPOINT`` handling, auth headers, ``Range`` resume, retries of a dropped
connection, the "server ignored Range" reset); this module gives it a file that stays where it is,
so the next run continues from its size. Checksums are the hub's own (the LFS sha256, else the git
blob id), checked on every file before it counts as downloaded.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from vrag_desktop.core.models.errors import (
    AccessError,
    ModelError,
    ModelNotFoundError,
    NetworkError,
    OfflineError,
)
from vrag_desktop.core.progress import Cancelled

#: Files a model folder does not need when the hub has them: other weight formats than the one
#: kept, pictures in the model card, git's own files.
_SKIP = (".gitattributes", "*.png", "*.jpg", "*.jpeg", "*.gif", "*.webp", "*.mp4", "*.pdf")
_OTHER_FORMATS = (
    "*.bin",
    "*.pt",
    "*.pth",
    "*.ckpt",
    "*.h5",
    "*.msgpack",
    "*.ot",
    "*.onnx",
    "*.onnx_data",
    "*.gguf",
    "*.tflite",
    "*.mlmodel",
    "*.xml",
    "openvino/*",
    "onnx/*",
    "coreml/*",
)
_HASH_CHUNK = 8 * 1024 * 1024
_CONNECTION_ERRORS = {
    "ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
    "RemoteProtocolError", "ReadError", "WriteError", "NetworkError", "ProtocolError", "ConnectionError",
    "NewConnectionError", "MaxRetryError", "IncompleteRead",
}  # fmt: skip


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repository at one commit, with the checksum the hub gives for it."""

    path: str
    size: int
    sha256: str | None = None  # LFS files
    git_sha1: str | None = None  # files stored in git itself: the blob id

    @property
    def checksum(self) -> tuple[str, str]:
        """``("sha256", hex)`` or ``("git-sha1", hex)``."""
        if self.sha256:
            return "sha256", self.sha256
        if self.git_sha1:
            return "git-sha1", self.git_sha1
        raise ModelError(f"the hub gave no checksum for {self.path}")

    def as_json(self) -> dict[str, Any]:
        return {"size": self.size, "sha256": self.sha256, "git_sha1": self.git_sha1}


@dataclass(frozen=True)
class RemoteModel:
    """What a pull will fetch: the repository's canonical id, the commit a revision names, files."""

    repo_id: str
    revision: str
    commit: str
    files: tuple[RemoteFile, ...]
    endpoint: str
    gated: bool = False

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def validate_repo_id(spec: str) -> str:
    """``spec`` if it is a hub id (``owner/name``), else :class:`ModelError`."""
    from huggingface_hub.utils import HFValidationError
    from huggingface_hub.utils import validate_repo_id as _validate

    try:
        _validate(spec)
    except HFValidationError as exc:
        raise ModelError(
            f"{spec!r} is neither a Hugging Face model id (owner/name) nor a model folder: {exc}"
        ) from None
    return spec


def select_files(names: list[str]) -> list[str]:
    """The files a model folder needs: everything but pictures, git files and other weight formats
    than the one kept (safetensors when present)."""
    has_safetensors = any(n.endswith(".safetensors") for n in names)
    skip = _SKIP + (_OTHER_FORMATS if has_safetensors else tuple(p for p in _OTHER_FORMATS if p != "*.bin"))
    return [n for n in names if not any(fnmatch(n, p) or fnmatch(PurePosixPath(n).name, p) for p in skip)]


def safe_relative(path: str) -> PurePosixPath:
    """A repository file name that stays inside its folder (no ``..``, no absolute path)."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or "\\" in path or not p.parts or path.startswith("."):
        raise ModelError(f"the hub listed an unsafe file name: {path!r}")
    return p


def hub_error(
    exc: BaseException, *, repo_id: str, endpoint: str, has_token: bool, revision: str | None = None
) -> ModelError | None:
    """The sentence for a failure of the hub or the network; None for anything else."""
    from huggingface_hub import errors

    entry_missing = getattr(errors, "RemoteEntryNotFoundError", None) or errors.EntryNotFoundError
    page = f"{endpoint}/{repo_id}"
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return OfflineError(f"cannot reach {endpoint}: offline (HF_HUB_OFFLINE is set)")
    if isinstance(exc, errors.GatedRepoError):
        if has_token:
            return AccessError(
                f"{repo_id} is gated and your token has no access to it: accept its terms at {page} "
                "with the account the token belongs to"
            )
        return AccessError(
            f"{repo_id} is gated: accept its terms at {page}, then give a token "
            "(`vrag-desktop models settings --token-stdin`, or Settings → Models)"
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return ModelNotFoundError(f"{repo_id} has no revision {revision!r} on {endpoint}")
    if isinstance(exc, entry_missing):
        return ModelNotFoundError(f"a file of {repo_id} is missing on {endpoint}: {exc}".splitlines()[0])
    if isinstance(exc, errors.RepositoryNotFoundError):
        hint = "or your token has no access to it" if has_token else "if it is private, give a token"
        return ModelNotFoundError(f"no model {repo_id!r} on {endpoint}: check the id ({hint})")
    if isinstance(exc, errors.HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        if status in (401, 403):
            what = "refused the token" if has_token else "asks for a token"
            return AccessError(f"{endpoint} {what} for {repo_id} (HTTP {status})")
        if status >= 500 or status == 429:
            return NetworkError(f"{endpoint} answered HTTP {status} for {repo_id}: try again later")
        return ModelError(f"{endpoint} answered HTTP {status} for {repo_id}")
    reason = connection_reason(exc)
    if reason:
        return NetworkError(
            f"cannot reach {endpoint} ({reason}): check the network, or set a mirror "
            "(`vrag-desktop models settings --endpoint URL`); downloaded models work offline"
        )
    return None


def connection_reason(exc: BaseException) -> str | None:
    """``connection refused`` / ``name not resolved`` / … when ``exc`` (or its cause) is a network
    failure, else None."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen).lower()
        if isinstance(seen, socket.gaierror) or "name or service not known" in text or "nodename" in text:
            return "the name does not resolve"
        if isinstance(seen, ConnectionRefusedError) or "connection refused" in text:
            return "connection refused"
        if isinstance(seen, TimeoutError) or "timed out" in text or "timeout" in type(seen).__name__.lower():
            return "timed out"
        if isinstance(seen, ConnectionError) or type(seen).__name__ in _CONNECTION_ERRORS:
            return "the connection failed or was dropped"
        seen = seen.__cause__ or seen.__context__
    return None


def fetch_remote(repo_id: str, revision: str | None, *, endpoint: str, token: str | None) -> RemoteModel:
    """The files (with sizes and checksums) of ``repo_id`` at ``revision`` (default ``main``)."""
    from huggingface_hub import HfApi

    from vrag_desktop._version import __version__

    rev = revision or "main"
    api = HfApi(
        endpoint=endpoint, token=token or False, library_name="vrag-desktop", library_version=__version__
    )
    try:
        info = api.model_info(repo_id, revision=rev, files_metadata=True, timeout=30)
    except Exception as exc:
        err = hub_error(exc, repo_id=repo_id, endpoint=endpoint, has_token=bool(token), revision=rev)
        if err is None:
            raise
        raise err from None
    if not info.sha:
        raise ModelError(f"{endpoint} gave no commit for {repo_id}@{rev}: is it a Hugging Face hub?")
    siblings = {s.rfilename: s for s in info.siblings or []}
    files = []
    for name in select_files(sorted(siblings)):
        s = siblings[name]
        safe_relative(name)
        size = s.lfs.size if s.lfs is not None else s.size
        if size is None:
            raise ModelError(f"{endpoint} gave no size for {repo_id}/{name}")
        files.append(
            RemoteFile(name, int(size), s.lfs.sha256 if s.lfs else None, None if s.lfs else s.blob_id)
        )
        files[-1].checksum  # noqa: B018 - refuse a file without a checksum now, not after its download
    if not files:
        raise ModelError(f"{repo_id}@{rev} on {endpoint} has no model files")
    gated = bool(info.gated) if info.gated is not None else False
    return RemoteModel(info.id or repo_id, rev, info.sha, tuple(files), endpoint, gated)


def request_headers(token: str | None) -> dict[str, str]:
    """huggingface_hub's headers (user agent, auth), asking for the bytes as stored (no gzip), so
    that sizes and ``Range`` offsets are the file's."""
    from huggingface_hub.utils import build_hf_headers

    from vrag_desktop._version import __version__

    headers = build_hf_headers(token=token or False, library_name="vrag-desktop", library_version=__version__)
    headers["Accept-Encoding"] = "identity"
    return headers


def file_url(remote: RemoteModel, path: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(remote.repo_id, path, revision=remote.commit, endpoint=remote.endpoint)


class _Sink:
    """The file ``http_get`` writes into: counts bytes, and stops the transfer (raises
    :class:`Cancelled`) at the next chunk once ``stop()`` says so."""

    def __init__(self, fh: BinaryIO, on_bytes: Callable[[int], None], stop: Callable[[], bool]) -> None:
        self._fh, self._on_bytes, self._stop = fh, on_bytes, stop

    def write(self, chunk: bytes) -> int:
        if self._stop():
            raise Cancelled()
        n = self._fh.write(chunk)
        self._on_bytes(len(chunk))
        return n

    def tell(self) -> int:
        return self._fh.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._fh.seek(offset, whence)

    def truncate(self, size: int | None = None) -> int:
        """Used when a server ignores ``Range`` and sends the whole file: the count goes back too."""
        self._fh.flush()
        end = os.fstat(self._fh.fileno()).st_size
        cut = self._fh.tell() if size is None else size
        n = self._fh.truncate(cut)
        self._on_bytes(cut - end)
        return n


class _Silent:
    """A do-nothing progress bar for ``http_get`` (progress goes through the sink instead)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, n: float | None = 1) -> None:
        pass

    def close(self) -> None:
        pass


def download(
    url: str,
    target: Path,
    *,
    size: int,
    headers: dict[str, str],
    on_bytes: Callable[[int], None],
    stop: Callable[[], bool],
) -> None:
    """Bring ``target`` (an ``.incomplete`` file) up to ``size`` bytes, continuing from what it
    holds. Raises :class:`Cancelled` when ``stop()``; network and HTTP errors as huggingface_hub
    raises them (after its own retries of a dropped connection)."""
    from huggingface_hub.file_download import http_get

    have = target.stat().st_size if target.exists() else 0
    if have > size:  # not a prefix of this file: start again
        target.unlink()
        have = 0
    kwargs: dict[str, Any] = {"resume_size": have, "headers": dict(headers), "expected_size": size}
    if "tqdm_class" in inspect.signature(http_get).parameters:
        kwargs["tqdm_class"] = _Silent
    with target.open("ab") as fh:
        if have == size:
            return
        sink = _Sink(fh, on_bytes, stop)
        http_get(url, sink, displayed_filename=target.name, **kwargs)  # type: ignore[arg-type]


def digest(path: Path, algorithm: str, on_bytes: Callable[[int], None], stop: Callable[[], bool]) -> str:
    """The file's ``sha256``, or its git blob id (``git-sha1``: sha1 of ``blob <size>\\0`` + bytes)."""
    h = hashlib.sha256() if algorithm == "sha256" else hashlib.sha1()
    if algorithm == "git-sha1":
        h.update(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            if stop():
                raise Cancelled()
            h.update(chunk)
            on_bytes(len(chunk))
    return h.hexdigest()


def fetch_small_file(
    remote: RemoteModel, path: str, token: str | None, limit: int = 4 * 1024 * 1024
) -> bytes:
    """A small file of the repository (``config.json``) in memory, to size a model before pulling."""
    import io

    from huggingface_hub.file_download import http_get

    f = next((f for f in remote.files if f.path == path), None)
    if f is None or f.size > limit:
        raise ModelNotFoundError(f"{remote.repo_id} has no {path}")
    buf = io.BytesIO()
    kwargs: dict[str, Any] = {"headers": request_headers(token), "expected_size": f.size}
    if "tqdm_class" in inspect.signature(http_get).parameters:
        kwargs["tqdm_class"] = _Silent
    try:
        http_get(file_url(remote, path), buf, **kwargs)
    except Exception as exc:
        err = hub_error(exc, repo_id=remote.repo_id, endpoint=remote.endpoint, has_token=bool(token))
        if err is None:
            raise
        raise err from None
    return buf.getvalue()
