"""Numpy arrays passed again: the tensor made for a small array is reused while the array's
header is unchanged (python/src/recent_arrays.rs), and never when it changed."""

import gc
import sys
import threading

import numpy as np
import pytest

import relaxvm as rx
from conftest import identity_vm


@pytest.fixture(autouse=True)
def empty_cache():
    rx.clear_array_cache()
    yield
    rx.clear_array_cache()


def test_an_array_passed_again_is_the_same_tensor_and_object():
    f = identity_vm()["id"]
    a = np.arange(6, dtype="float32")
    first, second, third = f(a), f(a), f(a)
    assert second is third  # the kept entry holds the tensor's object from the second call on
    assert first.same_storage(second)
    assert np.shares_memory(third.numpy(), a)
    a[2] = 42.0  # a view, not a copy kept from before
    assert f(a).numpy()[2] == 42.0


def test_the_cache_holds_one_reference_and_clearing_drops_it():
    f = identity_vm()["id"]
    a = np.arange(10, dtype="int64")
    base = sys.getrefcount(a)
    for _ in range(5):
        f(a)
    gc.collect()
    assert sys.getrefcount(a) == base + 1  # the kept tensor's storage
    rx.clear_array_cache()
    assert sys.getrefcount(a) == base


def test_large_arrays_are_not_kept():
    f = identity_vm()["id"]
    a = np.zeros((64 << 10) // 4 + 1, dtype="float32")  # one element past 64 KiB
    base = sys.getrefcount(a)
    f(a)
    f(a)
    gc.collect()
    assert sys.getrefcount(a) == base


def test_old_entries_are_replaced_in_turn():
    f = identity_vm()["id"]
    arrays = [np.full(3, i, dtype="int32") for i in range(9)]
    base = sys.getrefcount(arrays[0])
    for a in arrays:
        f(a)
    del a
    gc.collect()
    # Counted outside the asserts, whose rewriting would hold `arrays[i]` in a temporary.
    first, last = sys.getrefcount(arrays[0]), sys.getrefcount(arrays[8])
    assert first == base  # the ninth array took the first one's place
    assert last == base + 1
    assert [int(f(a).numpy()[0]) for a in arrays] == list(range(9))


# The two tests below change an array in place on purpose: the binding remembers recent arrays by
# object, and the same object with another shape or dtype must not be taken for the one it saw
# (a new view, what NumPy 2.5 recommends instead, would be another object). NumPy 2.5 deprecates
# setting `.shape` and `.dtype`; the warning is expected there.
_IN_PLACE_CHANGE = pytest.mark.filterwarnings(
    "ignore:Setting the (shape|dtype) on a NumPy array has been deprecated:DeprecationWarning"
)


@_IN_PLACE_CHANGE
def test_a_reshaped_array_is_viewed_anew():
    f = identity_vm()["id"]
    a = np.arange(8, dtype="float32")
    assert f(a).shape == (8,)
    a.shape = (2, 4)
    out = f(a)
    assert out.shape == (2, 4)
    np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype="float32").reshape(2, 4))


@_IN_PLACE_CHANGE
def test_a_retyped_array_is_viewed_anew():
    f = identity_vm()["id"]
    a = np.arange(4, dtype="float32")
    assert f(a).dtype == "float32"
    a.dtype = np.int32
    out = f(a)
    assert out.dtype == "int32"
    np.testing.assert_array_equal(out.numpy(), np.arange(4, dtype="float32").view(np.int32))


def test_an_array_made_read_only_is_copied():
    f = identity_vm()["id"]
    a = np.arange(4, dtype="float64")
    assert np.shares_memory(f(a).numpy(), a)
    a.flags.writeable = False
    out = f(a)
    assert not np.shares_memory(out.numpy(), a)
    np.testing.assert_array_equal(out.numpy(), a)


def test_a_resized_array_is_viewed_anew():
    f = identity_vm()["id"]
    a = np.arange(4, dtype="int64")
    f(a)
    rx.clear_array_cache()  # numpy's resize refuses an array referenced elsewhere
    a.resize(1000, refcheck=False)
    out = f(a)
    assert out.shape == (1000,)
    assert np.shares_memory(out.numpy(), a)


def test_a_resize_refused_while_kept_works_after_clearing():
    f = identity_vm()["id"]
    a = np.arange(4, dtype="int64")
    f(a)
    gc.collect()
    with pytest.raises(ValueError, match="referenced"):
        a.resize(8)
    rx.clear_array_cache()
    a.resize(8)
    assert f(a).shape == (8,)


def test_bool_arrays_are_checked_at_every_call():
    f = identity_vm()["id"]
    raw = np.array([0, 1, 0], dtype="uint8")
    flags = raw.view(bool)
    assert f(flags).numpy().tolist() == [False, True, False]
    raw[0] = 7  # not a valid bool byte: the next conversion must see it
    assert f(flags).numpy().tolist() == [True, True, False]


def test_copied_arrays_are_not_kept():
    f = identity_vm()["id"]
    a = np.arange(12, dtype="float32")[::-1]  # a negative stride is copied
    base = sys.getrefcount(a)
    out = f(a)
    assert not np.shares_memory(out.numpy(), a)
    del out
    gc.collect()
    assert sys.getrefcount(a) == base
    a = np.arange(4, dtype=">f4")  # so is a non-native byte order
    base = sys.getrefcount(a)
    np.testing.assert_array_equal(f(a).numpy(), np.arange(4, dtype="float32"))
    gc.collect()
    assert sys.getrefcount(a) == base


def test_each_thread_keeps_its_own():
    f = identity_vm()["id"]
    a = np.arange(5, dtype="int16")
    base = sys.getrefcount(a)
    seen = []

    def work():
        seen.append(f(a).numpy().tolist())
        rx.clear_array_cache()  # this thread's entry only

    t = threading.Thread(target=work)
    t.start()
    t.join()
    f(a)
    gc.collect()
    assert seen == [[0, 1, 2, 3, 4]]
    assert sys.getrefcount(a) == base + 1  # the main thread's entry
    rx.clear_array_cache()
    assert sys.getrefcount(a) == base


def test_a_finalizer_passing_arrays_during_a_conversion_is_safe():
    # Making a kept entry's object may run the garbage collector, and so finalizers that call
    # VMs with arrays on the same thread.
    f = identity_vm()["id"]
    b = np.arange(3, dtype="float32")

    class Calls:
        def __del__(self):
            f(b)

    thresholds = gc.get_threshold()
    gc.set_threshold(1)
    try:
        a = np.arange(3, dtype="int32")
        for _ in range(50):
            c = Calls()
            c.self = c  # a cycle: only the collector frees it
            del c
            assert f(a).numpy().tolist() == [0, 1, 2]
    finally:
        gc.set_threshold(*thresholds)
