"""Core of VRAG Desktop: corpus, embedders, index, search. No Qt here (checked by import-linter).

Long work is written as generators that yield :class:`~vrag_desktop.core.progress.Progress` and stop at
the next yield when closed or cancelled, so core code never knows which thread runs it.
"""
