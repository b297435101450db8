"""Datasets: the Datasets dock, the item dialog (Add to dataset… from History, edit) <-> core.datasets.store."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vrag_desktop.core.datasets.store import DatasetStore
    from vrag_desktop.qt.context import AppContext


def dataset_store(ctx: AppContext) -> DatasetStore:
    """The one store of ``ctx``'s data directory (kept in the context's cache, which a data directory
    switch clears), so the dialog and the dock serialise their writes on the same lock."""
    from vrag_desktop.core.datasets.store import DatasetStore

    store = ctx._cache.get("datasets")
    if not isinstance(store, DatasetStore) or store.root != ctx.layout.datasets:
        store = ctx._cache["datasets"] = DatasetStore(ctx.layout.datasets)
    return store
