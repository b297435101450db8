"""long_lived(): no collections while loading, survivors frozen, collector back on afterwards."""

from __future__ import annotations

import gc
import threading

from vrag_desktop.core.long_lived import long_lived


def test_collector_off_inside_and_survivors_frozen() -> None:
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with long_lived():
        assert not gc.isenabled()
        with long_lived():  # nested: still off
            keep = [[i] for i in range(1000)]  # lists: tracked by the collector (a dict of ints is not)
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(keep)
    gc.unfreeze()


def test_concurrent_loads_re_enable_once_all_are_done() -> None:
    inside, release = threading.Event(), threading.Event()

    def load() -> None:
        with long_lived():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=load)
    t.start()
    assert inside.wait(5)
    with long_lived():
        pass
    assert not gc.isenabled()  # the other load is still running
    release.set()
    t.join(5)
    assert gc.isenabled()
    gc.unfreeze()


def test_collector_back_on_after_an_error() -> None:
    try:
        with long_lived():
            raise ValueError("model folder missing")
    except ValueError:
        pass
    assert gc.isenabled()
    gc.unfreeze()


def test_a_hold_ends_once_and_leaves_other_loads_alone() -> None:
    """hold(): the app's start, from main() to the first paint, is a load without a ``with`` block."""
    from vrag_desktop.core.long_lived import hold

    end = hold()
    assert not gc.isenabled()
    with long_lived():  # the warm-up's load, begun inside the start
        end()
        assert not gc.isenabled()  # still loading
        end()  # a second end (main's finally after the first paint's) must not end the load
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.unfreeze()
