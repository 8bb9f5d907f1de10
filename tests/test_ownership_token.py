"""A lease owner token reads the process's start time once per process, not once per run."""

from __future__ import annotations

import os

import pytest

from corral.runtime import ownership
from corral.runtime.ownership import Ownership
from corral.store.memory import MemoryStore


async def _io(call, *args):  # type: ignore[no-untyped-def]
    return call(*args)


def test_the_process_is_read_once_and_each_token_is_unique(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []
    real = ownership.process_started

    def counting(pid: int) -> str:
        reads.append(pid)
        return real(pid)

    monkeypatch.setattr(ownership, "process_started", counting)
    owners = Ownership(MemoryStore(), _io, 30.0)
    tokens = [owners.owner() for _ in range(3)]
    assert reads == [os.getpid()]
    assert len(set(tokens)) == 3
    prefix = f"{ownership.process_space()}:{os.getpid()}.{real(os.getpid())}:"
    assert all(token.startswith(prefix) for token in tokens)
