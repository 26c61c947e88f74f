"""The work queue between what happened (a commit, a watch event, a timer) and the reconciler.

Shaped after controller-runtime's workqueue, because its rules are what keep a
controller both quick and polite:

- **De-duplicated.** A key waiting in the queue is there once, however often it is
  added: a burst of a thousand watch events becomes one reconcile. Reasons are kept
  (so status and traces can say why a reconcile ran) but never multiply the work.
- **One at a time per key.** A key being processed is not handed out again; if it
  is added meanwhile it is marked dirty and queued once when ``done`` is called, so
  nothing that happened during a reconcile is lost.
- **Rate-limited.** Failures back off exponentially per key (``base`` doubling up to
  ``cap``), and ``forget`` resets a key after a success; a token bucket (``qps``,
  ``burst``) caps the overall rate so a hot loop can never hammer the API server.

The delays are computed by ``RateLimiter``, a pure class that takes the time as an
argument, so its arithmetic is tested without a clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio


@dataclass
class RateLimiter:
    """controller-runtime's default: per-key exponential failure backoff, max'd with a token bucket."""

    base: float = 0.005
    cap: float = 300.0
    qps: float = 10.0
    burst: int = 100
    failures: dict[str, int] = field(default_factory=dict)
    _tokens: float | None = field(init=False, default=None)
    _last: float = field(init=False, default=0.0)

    def backoff(self, key: str) -> float:
        """The delay for one more failure of ``key``: base·2ⁿ, at most ``cap``."""
        n = self.failures.get(key, 0)
        self.failures[key] = n + 1
        if n >= 64:
            return self.cap
        return min(self.cap, self.base * math.pow(2, n))

    def bucket(self, *, now: float) -> float:
        """The delay the overall token bucket asks for one more item at ``now``."""
        tokens = float(self.burst) if self._tokens is None else self._tokens
        if self._tokens is None:
            self._last = now
        tokens = min(float(self.burst), tokens + (now - self._last) * self.qps) - 1.0
        self._tokens, self._last = tokens, now
        return 0.0 if tokens >= 0 else -tokens / self.qps

    def when(self, key: str, *, now: float) -> float:
        return max(self.backoff(key), self.bucket(now=now))

    def forget(self, key: str) -> None:
        self.failures.pop(key, None)

    def retries(self, key: str) -> int:
        return self.failures.get(key, 0)


@dataclass
class Item:
    key: str
    reasons: tuple[str, ...]


class WorkQueue:
    """De-duplicating queue of keys; ``get`` blocks until one is ready."""

    def __init__(self, *, limiter: RateLimiter | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limiter = limiter or RateLimiter()
        self._clock = clock
        self._order: list[str] = []
        self._reasons: dict[str, list[str]] = {}
        self._processing: set[str] = set()
        self._dirty: dict[str, list[str]] = {}
        self._waiting: dict[str, float] = {}
        self._wake = anyio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._order)

    def add(self, key: str, *, reason: str) -> None:
        """Queue ``key`` now (once, however often it is added)."""
        if self._closed:
            return
        if key in self._processing:
            self._dirty.setdefault(key, []).append(reason)
            return
        reasons = self._reasons.setdefault(key, [])
        if reason not in reasons:
            reasons.append(reason)
        if key not in self._order:
            self._order.append(key)
            self._waiting.pop(key, None)
        self._notify()

    def add_after(self, key: str, *, delay: float, reason: str) -> None:
        """Queue ``key`` in ``delay`` seconds (an earlier pending time wins)."""
        if delay <= 0:
            self.add(key, reason=reason)
            return
        due = self._clock() + delay
        if key in self._order:
            return
        current = self._waiting.get(key)
        if current is None or due < current:
            self._waiting[key] = due
        self._reasons.setdefault(key, [])
        if reason not in self._reasons[key]:
            self._reasons[key].append(reason)
        self._notify()

    def add_rate_limited(self, key: str, *, reason: str) -> float:
        """Queue ``key`` after its failure backoff; returns the delay."""
        delay = self.limiter.when(key, now=self._clock())
        self.add_after(key, delay=delay, reason=reason)
        return delay

    def forget(self, key: str) -> None:
        """``key`` succeeded: its next failure starts from the base delay again."""
        self.limiter.forget(key)

    def done(self, key: str) -> None:
        """Processing ``key`` finished; if it was added meanwhile, queue it once more."""
        self._processing.discard(key)
        dirty = self._dirty.pop(key, None)
        if dirty is not None:
            for reason in dirty:
                self.add(key, reason=reason)

    def close(self) -> None:
        self._closed = True
        self._notify()

    async def get(self) -> Item:
        """The next ready key (marked as processing until ``done``); waits as long as needed."""
        while True:
            if self._closed:
                raise anyio.EndOfStream
            self._promote()
            if self._order:
                key = self._order.pop(0)
                self._processing.add(key)
                return Item(key=key, reasons=tuple(self._reasons.pop(key, [])))
            wake = self._wake
            timeout = min(self._waiting.values()) - self._clock() if self._waiting else math.inf
            with anyio.move_on_after(max(timeout, 0.0)):
                await wake.wait()

    def _promote(self) -> None:
        """Move due keys to the front, earliest first: they have waited longest."""
        now = self._clock()
        due_keys: list[str] = []
        for key, due in sorted(self._waiting.items(), key=lambda kv: kv[1]):
            if due <= now and key not in self._processing:
                del self._waiting[key]
                if key not in self._order:
                    due_keys.append(key)
            elif due <= now:
                del self._waiting[key]
                self._dirty.setdefault(key, []).extend(self._reasons.get(key, []) or ["retry"])
        self._order[:0] = due_keys

    def _notify(self) -> None:
        self._wake.set()
        self._wake = anyio.Event()


__all__ = ["Item", "RateLimiter", "WorkQueue"]
