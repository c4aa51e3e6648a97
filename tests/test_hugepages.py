"""Tests for caesar.hugepages: the /proc/self/maps arithmetic, then a real collapse."""

from __future__ import annotations

import ctypes
import mmap
import pathlib
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.hugepages import (
    HUGE_PAGE,
    anonymous_ranges,
    collapse_new_memory,
    huge_aligned,
    new_ranges,
)

MAPS = """\
55d1c0a00000-55d1c0a2a000 r--p 00000000 fd:01 1234                       /usr/bin/python3.11
55d1c2000000-55d1c6000000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0004000000 rw-p 00000000 00:00 0
7f0004000000-7f0008000000 ---p 00000000 00:00 0
7f0008000000-7f0008400000 rw-s 00000000 00:05 77                         /dev/shm/x
7f0008400000-7f0008800000 rw-p 00001000 fd:01 99                         /lib/libfoo.so
7f0008800000-7f0008c00000 rw-p 00000000 00:00 0                          [anon:glibc: malloc]
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
"""


def test_anonymous_ranges_keeps_private_writable_anonymous_memory_and_the_heap() -> None:
    assert anonymous_ranges(MAPS) == [
        (0x55D1C2000000, 0x55D1C6000000),  # [heap]
        (0x7F0000000000, 0x7F0004000000),  # anonymous mmap
        (0x7F0008800000, 0x7F0008C00000),  # named anonymous mapping
    ]  # not: read-only text, PROT_NONE reservation, shared, file-backed, stack


def test_new_ranges_returns_new_mappings_and_only_the_grown_tail_of_old_ones() -> None:
    before = [(0x1000, 0x5000), (0x10000, 0x20000)]
    after = [(0x1000, 0x9000), (0x10000, 0x20000), (0x30000, 0x40000)]
    assert new_ranges(before, after) == [(0x5000, 0x9000), (0x30000, 0x40000)]
    # a mapping that moved so it overlaps an old one on both sides keeps only its new middle
    assert new_ranges([(0, 10), (20, 30)], [(5, 25)]) == [(10, 20)]
    assert new_ranges(before, before) == []


def _disjoint(points: list[int]) -> list[tuple[int, int]]:
    """Non-overlapping ranges, as /proc/self/maps lists them, from distinct sorted points."""
    points = sorted(set(points))
    return [(points[i], points[i + 1]) for i in range(0, len(points) - 1, 2)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 300), max_size=14).map(_disjoint),
    st.lists(st.integers(0, 300), max_size=14).map(_disjoint),
)
def test_new_ranges_covers_exactly_the_addresses_only_after_has(
    before: list[tuple[int, int]], after: list[tuple[int, int]]
) -> None:
    got = new_ranges(before, after)
    covered = {x for lo, hi in got for x in range(lo, hi)}
    old = {x for lo, hi in before for x in range(lo, hi)}
    assert covered == {x for lo, hi in after for x in range(lo, hi)} - old
    assert sum(hi - lo for lo, hi in got) == len(covered)  # no piece counted twice


def test_huge_aligned() -> None:
    mib = 1 << 20
    assert huge_aligned(1 * mib, 7 * mib) == (2 * mib, 6 * mib)
    assert huge_aligned(2 * mib, 4 * mib) == (2 * mib, 4 * mib)
    assert huge_aligned(1 * mib, 4 * mib + 5) == (2 * mib, 4 * mib)
    assert huge_aligned(1 * mib, 3 * mib) is None  # holds no whole huge page


def _thp_mode() -> str:
    """'always', 'madvise' or 'never' ('never' also where MADV_COLLAPSE cannot exist)."""
    thp = pathlib.Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not sys.platform.startswith("linux") or not thp.exists():
        return "never"
    release = pathlib.Path("/proc/sys/kernel/osrelease").read_text().split(".")
    if (int(release[0]), int(release[1])) < (6, 1):  # MADV_COLLAPSE is 6.1+
        return "never"
    return thp.read_text().split("[")[1].split("]")[0]


def _anon_huge_kib(start: int, end: int) -> int:
    """AnonHugePages of this process's mappings overlapping [start, end)."""
    total, inside = 0, False
    for line in pathlib.Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            inside = lo < end and start < hi
        elif inside and line.startswith("AnonHugePages:"):
            total += int(fields[1])
    return total


def _fresh_private_memory(size: int) -> tuple[mmap.mmap, int]:
    """Private anonymous memory nobody advised about huge pages, every page written."""
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.write(bytes(range(256)) * (size // 256))
    return region, ctypes.addressof(ctypes.c_char.from_buffer(region))


@pytest.mark.skipif(_thp_mode() == "never", reason="needs Linux >= 6.1 with THP not 'never'")
def test_collapse_new_memory_backs_a_fresh_allocation_with_huge_pages() -> None:
    size = 16 * HUGE_PAGE
    if _thp_mode() == "madvise":  # control: left alone, the same memory stays on 4 KiB pages
        control, addr = _fresh_private_memory(size)
        assert _anon_huge_kib(addr, addr + size) == 0
        control.close()
    with collapse_new_memory() as done:
        region, addr = _fresh_private_memory(size)
    assert done.bytes >= 14 * HUGE_PAGE, done
    assert _anon_huge_kib(addr, addr + size) >= 14 * HUGE_PAGE // 1024
    assert region[:] == bytes(range(256)) * (size // 256)  # the data is untouched
    region.close()


def test_collapse_new_memory_with_nothing_new_does_nothing() -> None:
    with collapse_new_memory() as done:
        pass
    assert done.failed == 0
    assert done.bytes <= 4 * HUGE_PAGE  # at most what another thread happened to map
