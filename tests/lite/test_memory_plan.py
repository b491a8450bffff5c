"""The arena planner and the compiled plans of real graphs: no two simultaneously live tensors overlap."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import lite
import models
from lite.memory_plan import ALIGNMENT, Buffer, RunPool, aligned_copy, aligned_zeros, plan
from tests.util import session_for, small_cnn


def _assert_disjoint(buffers: list[Buffer], offsets: list[int]) -> None:
    for (a, oa), (b, ob) in itertools.combinations(zip(buffers, offsets), 2):
        if a.overlaps_in_time(b) and a.size and b.size:
            assert oa + a.size <= ob or ob + b.size <= oa, (a, oa, b, ob)


def test_buffers_alive_together_never_share_bytes() -> None:
    rng = np.random.default_rng(0)
    buffers = []
    for _ in range(200):
        first = int(rng.integers(0, 50))
        buffers.append(Buffer(int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 10))))
    offsets, total = plan(buffers)
    _assert_disjoint(buffers, offsets)
    assert all(o % 64 == 0 for o in offsets)
    assert total >= max(o + b.size for o, b in zip(offsets, buffers))


def test_buffers_with_disjoint_lifetimes_reuse_memory() -> None:
    buffers = [Buffer(1000, 0, 1), Buffer(1000, 2, 3), Buffer(1000, 4, 5)]
    offsets, total = plan(buffers)
    assert offsets == [0, 0, 0] and total == 1024


def test_chain_needs_two_buffers_not_n() -> None:
    buffers = [Buffer(640, i, i + 1) for i in range(10)]
    _, total = plan(buffers)
    assert total == 2 * 640


@pytest.mark.parametrize("name", ["small_cnn", "resnet18", "mobilenet_v2"])
def test_compiled_plan_has_no_overlapping_live_tensors(name: str) -> None:
    model = small_cnn() if name == "small_cnn" else models.build(name, num_classes=10, input_size=32)
    session = session_for(model)
    placements = session._plan.placements
    assert session.arena_bytes == max(p.offset + p.size for p in placements)
    for a, b in itertools.combinations(placements, 2):
        if a.first <= b.last and b.first <= a.last and a.size and b.size:
            assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset, (a, b)


def test_plan_is_smaller_than_keeping_every_tensor() -> None:
    session = session_for(models.build("resnet18", num_classes=10, input_size=32))
    every = sum(p.size for p in session._plan.placements)      # tensors and scratch, each in its own space
    assert session.arena_bytes < every / 4


def test_in_place_ops_share_their_input_buffer() -> None:
    session = session_for(models.build("resnet18", num_classes=10, input_size=32), thread_num=1)
    assert any(len(p.tensors) > 1 for p in session._plan.placements)


def test_run_pool_serves_a_repeated_run_from_its_arena() -> None:
    pool = RunPool(limit=1 << 20)
    requests = [(256, 0, 1), (512, 1, 2), (128, 2, 3)]
    first = [pool.take(*r) for r in requests]
    pool.finish()
    assert pool.plans == 1 and pool.allocations == 3
    second = [pool.take(*r) for r in requests]
    pool.finish()
    assert pool.plans == 1 and pool.allocations == 3          # nothing new
    assert all(np.shares_memory(b, pool.arena) for b in second)
    assert not any(np.shares_memory(a, pool.arena) for a in first)
    offsets, total = plan([Buffer(*r) for r in requests])
    assert pool.arena.nbytes == total


def test_run_pool_refuses_live_bytes_over_its_limit() -> None:
    pool = RunPool(limit=1000)
    assert pool.take(600, 0, 1) is not None
    assert pool.take(600, 1, 1) is None                        # 1200 bytes alive at step 1
    assert pool.take(600, 2, 2) is not None                    # the first one died at step 1


@pytest.mark.parametrize("size", [1, 63, 64, 1000, 1 << 20])
def test_aligned_buffers_start_on_a_cache_line(size: int) -> None:
    """numpy starts its arrays on 16 bytes; vector loads of arenas and packed weights want whole lines (an
    empty buffer has no start to align)."""
    assert aligned_zeros(size).ctypes.data % ALIGNMENT == 0 and aligned_zeros(size).nbytes == size
    source = np.arange(size, dtype=np.float32).reshape(-1, 1)[::1]
    copy = aligned_copy(source)
    assert copy.ctypes.data % ALIGNMENT == 0 and copy.flags.c_contiguous
    np.testing.assert_array_equal(copy, source)
    assert aligned_zeros(0).nbytes == 0


def test_every_tensor_of_a_compiled_plan_starts_on_a_cache_line() -> None:
    plan = session_for(small_cnn())._plan
    assert plan.arena.ctypes.data % ALIGNMENT == 0
    assert plan.placements and all(p.offset % ALIGNMENT == 0 for p in plan.placements)


def test_an_allocation_the_system_refuses_is_memory_failed_naming_its_size() -> None:
    with pytest.raises(lite.MemoryFailedError, match=f"cannot allocate the test's arena of {1 << 60} bytes") as e:
        aligned_zeros(1 << 60, "the test's arena")
    assert e.value.status == lite.RET_MEMORY_FAILED
