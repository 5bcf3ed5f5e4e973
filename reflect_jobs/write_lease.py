"""The write lease: at most ``REFLECT_WRITE_CONCURRENCY`` paid calls in flight (ARCHITECTURE §4).

The quota gate and the caps decide on the telemetry of the answers already recorded. With
two workers and no lease, two calls started before the first answer's telemetry could
close the gate (4 of 6 trials). So a write takes one of N slots (default 1) *before* the
quota gate and the caps, and gives it back only after its answer and telemetry are
recorded: the next caller always decides on the latest telemetry.

A slot must be freed when its holder dies, and a held slot must never block forever:

* **SQLite queue (one machine):** slot ``i`` is an ``flock`` on
  ``write-lease.<i>.lock`` next to the queue file. The kernel releases it the moment the
  holding process dies (SIGKILL included); the lock file descriptor is not inherited by
  the model subprocess (Python opens it close-on-exec).
* **Redis queue (several machines):** slot ``i`` is the key ``<queue>.write-lease.<i>``
  set with ``NX`` and a TTL (``REFLECT_WRITE_LEASE_TTL_SEC``) holding a random token. A
  thread of the holder renews the TTL every third of it while the call runs, so a long
  call keeps its slot and a killed holder's slot expires within one TTL. Renewal and
  release only touch the key while it still holds our token.

Waiting is bounded by the caller (``acquire(wait_sec)``): the write stage defers a job
that finds every slot taken — never failed, never charged — and tries again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from reflect_jobs.gates import Defer, Go

POLL_SEC = 0.05
_RENEW_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class Slot(Protocol):
    """A held slot; :meth:`release` is idempotent."""

    index: int

    def release(self) -> None:
        """Give the slot back (a second call does nothing)."""
        ...


class _FlockSlot:
    def __init__(self, index: int, fd: int) -> None:
        self.index = index
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


class _RedisSlot:
    def __init__(self, index: int, conn: Any, key: str, token: str, ttl_ms: int) -> None:
        self.index = index
        self._conn, self._key, self._token, self._ttl_ms = conn, key, token, ttl_ms
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"{key}-renew", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self._ttl_ms / 3000):
            try:
                if not self._conn.eval(_RENEW_LUA, 1, self._key, self._token, self._ttl_ms):
                    return  # expired and taken by someone else: nothing left to renew
            except Exception:  # a Redis blip: try again next period; the TTL is the backstop
                continue

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=1)
        with contextlib.suppress(Exception):  # unreachable Redis: the TTL frees the slot
            self._conn.eval(_RELEASE_LUA, 1, self._key, self._token)


class WriteLease:
    """N slots for the paid model call, shared by every worker and consumer of one queue.

    Build it with :meth:`for_flock` (SQLite queue) or :meth:`for_redis` (Redis queue).

    Args:
        slots: How many calls may be in flight at once (``REFLECT_WRITE_CONCURRENCY``).
        lock_dir: Directory of the ``flock`` files (SQLite queue), or None.
        redis: A redis client (Redis queue), or None.
        prefix: Key prefix of the Redis slots.
        ttl_sec: TTL of a Redis slot; renewed while held (``REFLECT_WRITE_LEASE_TTL_SEC``).
    """

    def __init__(
        self,
        *,
        slots: int,
        lock_dir: Path | None = None,
        redis: Any = None,
        prefix: str = "reflect",
        ttl_sec: float = 30,
    ) -> None:
        """Remember where the slots live; nothing is locked until :meth:`try_acquire`."""
        if (lock_dir is None) == (redis is None):
            raise ValueError("a write lease needs exactly one of lock_dir and redis")
        self.slots = max(1, slots)
        self.lock_dir = lock_dir
        self.redis = redis
        self.prefix = prefix
        self.ttl_ms = max(1000, int(ttl_sec * 1000))

    @classmethod
    def for_flock(cls, lock_dir: Path, *, slots: int) -> WriteLease:
        """Slots as ``flock`` files in ``lock_dir`` (created 0700 when missing).

        Args:
            lock_dir: The SQLite queue file's directory.
            slots: ``REFLECT_WRITE_CONCURRENCY``.

        Returns:
            The lease.
        """
        return cls(slots=slots, lock_dir=lock_dir)

    @classmethod
    def for_redis(cls, conn: Any, *, prefix: str, slots: int, ttl_sec: float) -> WriteLease:
        """Slots as Redis keys with a TTL, renewed while held.

        Args:
            conn: A redis client (Huey's ``RedisStorage.conn``).
            prefix: Key prefix (the queue's name).
            slots: ``REFLECT_WRITE_CONCURRENCY``.
            ttl_sec: ``REFLECT_WRITE_LEASE_TTL_SEC``.

        Returns:
            The lease.
        """
        return cls(slots=slots, redis=conn, prefix=prefix, ttl_sec=ttl_sec)

    def key(self, index: int) -> str:
        """The Redis key of slot ``index``.

        Args:
            index: 0 … ``slots - 1``.

        Returns:
            ``<prefix>.write-lease.<index>``.
        """
        return f"{self.prefix}.write-lease.{index}"

    def path(self, index: int) -> Path:
        """The lock file of slot ``index`` (SQLite queue).

        Args:
            index: 0 … ``slots - 1``.

        Returns:
            ``<lock_dir>/write-lease.<index>.lock``.
        """
        assert self.lock_dir is not None
        return self.lock_dir / f"write-lease.{index}.lock"

    def try_acquire(self) -> Slot | None:
        """Take a free slot now, without waiting.

        Returns:
            The held slot, or None when every slot is taken.
        """
        for index in range(self.slots):
            slot = self._take(index)
            if slot is not None:
                return slot
        return None

    def acquire(self, wait_sec: float) -> Slot | None:
        """Take a free slot, polling for up to ``wait_sec`` seconds.

        Args:
            wait_sec: The longest wait; 0 tries once.

        Returns:
            The held slot, or None when none came free in time.
        """
        deadline = time.monotonic() + max(0.0, wait_sec)
        while True:
            slot = self.try_acquire()
            if slot is not None or time.monotonic() >= deadline:
                return slot
            time.sleep(POLL_SEC)

    def _take(self, index: int) -> Slot | None:
        if self.redis is not None:
            token = secrets.token_hex(16)
            if self.redis.set(self.key(index), token, nx=True, px=self.ttl_ms):
                return _RedisSlot(index, self.redis, self.key(index), token, self.ttl_ms)
            return None
        assert self.lock_dir is not None
        self.lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path(index), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return _FlockSlot(index, fd)


#: The longest a paid pass waits for a write slot before it is deferred (a job is due again
#: at once, so the worker thread is free for other stages meanwhile; the dedupe pass tries
#: again at its next hourly run).
LEASE_WAIT_SEC = 10.0


class LeaseGate:
    """The write lease as a gate (:mod:`reflect_jobs.gates`): a slot, given back on release.

    Args:
        lease: The installation's write lease.
        wait_sec: How long to wait for a slot before deferring (:data:`LEASE_WAIT_SEC`, at
            most half a job's lease).
    """

    name = "write_lease"

    def __init__(self, lease: WriteLease, wait_sec: float = LEASE_WAIT_SEC) -> None:
        """Bind the gate to ``lease``; nothing is taken until :meth:`acquire`."""
        self.lease = lease
        self.wait_sec = wait_sec

    def acquire(self) -> Go | Defer:
        """Take a slot, waiting up to ``wait_sec``.

        Returns:
            ``Go`` holding the :class:`Slot`, or ``Defer`` due again now (every slot is
            busy: never a failure, never charged).
        """
        slot = self.lease.acquire(self.wait_sec)
        if slot is None:
            reason = f"write lease busy: {self.lease.slots} paid call(s) in flight"
            return Defer(self.name, reason, datetime.now(UTC))
        return Go(self.name, slot)

    def release(self, go: Go) -> None:
        """The answer and its telemetry are recorded: the next caller may go.

        Args:
            go: The pass holding the slot.
        """
        go.taken.release()

    def refund(self, go: Go) -> None:
        """A slot is not a charge: :meth:`release` gives it back.

        Args:
            go: The pass this gate gave.
        """


def make_write_lease(settings: Any, storage: Any) -> WriteLease:
    """The write lease for this installation's queue.

    Args:
        settings: The :class:`~reflect_jobs.config.Settings` (queue URL, concurrency, TTL).
        storage: Huey's storage (its Redis client is used on a Redis queue).

    Returns:
        Redis slots on a Redis queue, ``flock`` slots next to the SQLite queue file
        otherwise.
    """
    if settings.queue_is_redis:
        return WriteLease.for_redis(
            storage.conn,
            prefix=str(getattr(storage, "name", "reflect")),
            slots=settings.write_concurrency,
            ttl_sec=settings.write_lease_ttl_sec,
        )
    queue_file = Path(settings.queue_url[len("sqlite:///") :])
    return WriteLease.for_flock(queue_file.parent, slots=settings.write_concurrency)
