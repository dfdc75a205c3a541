"""Password hashing with argon2id, off the event loop.

Hashing and verification cost tens of milliseconds of CPU by design. They run
in worker threads, at most ``limit`` at a time, so a login storm makes logins
wait for each other but never stalls message traffic on the event loop.
"""

from __future__ import annotations

import anyio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

__all__ = ["hash_password", "verify", "verify_sync", "hash_sync", "set_concurrency", "configure"]

# Parameters for new hashes (a stored hash carries its own, so changing these never
# invalidates existing passwords). The default is the OWASP profile for argon2id
# (19 MiB, 2 passes, 1 lane): about 25 ms of one core per verification here, where
# argon2-cffi's own default (64 MiB, 3 passes, 4 lanes) took about 190 ms of CPU.
_hasher = PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1)


def configure(time_cost: int, memory_kib: int, parallelism: int) -> None:
    global _hasher
    _hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism)
_limiter: anyio.CapacityLimiter | None = None
_concurrency = 2


def set_concurrency(n: int) -> None:
    global _limiter, _concurrency
    _concurrency = max(1, n)
    _limiter = None


def _get_limiter() -> anyio.CapacityLimiter:
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(_concurrency)
    return _limiter


def hash_sync(password: str) -> str:
    return _hasher.hash(password)


def verify_sync(hashed: str, password: str) -> bool:
    try:
        return _hasher.verify(hashed, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


async def hash_password(password: str) -> str:
    return await anyio.to_thread.run_sync(hash_sync, password, limiter=_get_limiter())


async def verify(hashed: str, password: str) -> bool:
    return await anyio.to_thread.run_sync(verify_sync, hashed, password, limiter=_get_limiter())
