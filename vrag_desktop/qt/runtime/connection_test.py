""" "Test connection" and its verdict, for the endpoint the Endpoints form describes.

Why a coroutine task awaited by a GUI-side handler: the probe waits on the network for up to 15 s
on the private loop thread, while the handler (on the GUI thread's loop) reads top to bottom:
show "Testing…", await the probe, show the verdict. A second click while a test runs cancels it.
"""

from __future__ import annotations

import asyncio
import html
import re
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.errors import describe
from vrag_desktop.qt.infra.tasks import Task, run_coroutine, run_handler
from vrag_desktop.qt.runtime.profile_text import verdict_text
from vrag_desktop.qt.runtime.style import BAD, MUTED, OK, tone

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.client import ConnectionCheck
    from vrag_desktop.core.endpoints.profiles import EndpointProfile, ProfileStore


class ConnectionTest(QWidget):
    """The button and the verdict line under it."""

    verdictChanged = Signal(bool, str)  # ok, headline (also for tests)

    def __init__(self, store: ProfileStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._test: Task | None = None
        self.button = QPushButton("Test connection", self)
        self.button.setObjectName("testConnection")
        self.verdict_label = QLabel("", self)
        self.verdict_label.setObjectName("verdict")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict_label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(self.button, 0, Qt.AlignmentFlag.AlignLeft)
        v.addWidget(self.verdict_label)

    @property
    def testing(self) -> bool:
        return self._test is not None and not self._test.done()

    def run(self, profile: EndpointProfile | None, typed_key: str, *, known: bool) -> None:
        """Probe ``profile`` (None: the form has errors) with the typed key, else (for a saved
        profile, ``known``) the stored one."""
        if profile is None:
            self.set_verdict(False, "Fix the highlighted fields first", "")
            return
        if not profile.base_url:
            hint = (
                "Start the server in the Local vLLM tab; its address is filled in here."
                if profile.kind == "local-vllm"
                else "Enter the server's base URL."
            )
            self.set_verdict(False, "No base URL", hint)
            return
        store = self.store
        timeout = min(15.0, profile.total_timeout)

        async def probe() -> ConnectionCheck:
            from vrag_desktop.core.endpoints.client import OpenAIChatModel

            key: str | None = typed_key or None
            if key is None and known:
                key = await asyncio.to_thread(store.api_key, profile.name)
            model = OpenAIChatModel(
                profile.base_url,
                profile.model,
                key,
                connect_timeout=min(profile.connect_timeout, timeout),
                total_timeout=timeout,
                max_attempts=1,
                extra_body=profile.extra_body,
                default_params=profile.params,
            )
            try:
                return await model.check(timeout=timeout)
            finally:
                await model.aclose()

        self.button.setText("Cancel test")
        self.set_verdict(None, "Testing…", profile.base_url)
        test = self._test = run_coroutine(probe(), name="Connection test")
        run_handler(self._show(test, profile.model), error_title="Connection test failed")

    async def _show(self, test: Task, model: str) -> None:
        """Await the probe, then show its verdict, unless it was cancelled or replaced meanwhile."""
        try:
            check = await test
        except asyncio.CancelledError:
            return  # cancel() has reset the button already
        except Exception as exc:
            verdict = (False, "Test failed", describe(exc))
        else:
            verdict = (bool(check.ok), *verdict_text(check, model))
        if alive(self) and self._test is test:
            self._finished()
            self.set_verdict(*verdict)

    def cancel(self) -> None:
        if self._test is not None:
            self._test.cancel()
        self._finished()

    def _finished(self) -> None:
        self._test = None
        self.button.setText("Test connection")

    def set_verdict(self, ok: bool | None, head: str, detail: str) -> None:
        if not head:
            self.verdict_label.setText("")
            self.verdict_label.setToolTip("")
            return
        mark, role = {True: ("✓", OK), False: ("✗", BAD), None: ("", MUTED)}[ok]
        tone(self.verdict_label, role)
        text = f"<b>{html.escape(f'{mark} {head}'.strip())}</b>"
        if detail:
            text += f"<br><span>{html.escape(detail)}</span>"
        self.verdict_label.setText(text)
        self.verdict_label.setToolTip(detail)
        if ok is not None:
            self.verdictChanged.emit(ok, head)

    def verdict(self) -> str:
        """The verdict as plain text (headline and detail)."""
        return html.unescape(re.sub(r"<[^>]+>", " ", self.verdict_label.text())).strip()
