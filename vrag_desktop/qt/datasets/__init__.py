"""Datasets: the Datasets dock, the item dialog (Add to dataset… from History, edit) <-> core.datasets.store
(the store itself is ``AppContext.datasets``)."""
