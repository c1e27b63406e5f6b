"""The start gate: at most N upstreams start at once; one a call is waiting for jumps the queue.

Starting Python upstreams is CPU-bound (imports), and on a small machine starting them all at once
makes every one of them late (measured figures in `coffer.gateway.pool`).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio


class StartGate:
    """Lets at most `limit` upstreams start at once; an upstream a call waits for jumps the queue."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.active = 0
        self._changed = anyio.Event()

    async def acquire(self, urgent: Callable[[], bool]) -> None:
        while self.active >= self.limit and not urgent():
            changed = self._changed
            await changed.wait()
        self.active += 1

    def release(self) -> None:
        self.active -= 1
        self.poke()

    def poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def slot(self) -> Slot:
        return Slot(self)


class Slot:
    """One start's hold on the gate; released once, whichever comes first: ready, failed, or timed out."""

    def __init__(self, gate: StartGate) -> None:
        self.gate = gate
        self.held = False

    async def acquire(self, urgent: Callable[[], bool]) -> None:
        await self.gate.acquire(urgent)
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.gate.release()

    async def release_after(self, delay: float) -> None:
        await anyio.sleep(delay)
        self.release()
