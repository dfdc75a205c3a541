"""Password hashing with argon2id, off the event loop.

Hashing and verification cost tens of milliseconds of CPU by design. They run
in worker threads, at most ``limit`` at a time, so a login storm makes logins
wait for each other but never stalls message traffic on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from argon2 import PasswordHasher

__all__ = ["hash_password", "verify", "verify_sync", "hash_sync", "set_concurrency", "configure"]

# Parameters for new hashes (a stored hash carries its own, so changing these never
# invalidates existing passwords). The default is the OWASP profile for argon2id
# (19 MiB, 2 passes, 1 lane): about 25 ms of one core per verification here, where
# argon2-cffi's own default (64 MiB, 3 passes, 4 lanes) took about 190 ms of CPU.
_params = (2, 19456, 1)  # time_cost, memory_kib, parallelism
# made by the first hash or verification: argon2-cffi (with cffi, about 0.3 MiB) is not
# imported by a server nobody logs in to with a password
_hasher: PasswordHasher | None = None


def configure(time_cost: int, memory_kib: int, parallelism: int) -> None:
    global _hasher, _params
    _params = (time_cost, memory_kib, parallelism)
    _hasher = None


def _get_hasher() -> PasswordHasher:
    global _hasher
    if _hasher is None:  # two threads may both make one: the same parameters, either will do
        from argon2 import PasswordHasher

        time_cost, memory_kib, parallelism = _params
        _hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism)
    return _hasher


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
    return _get_hasher().hash(password)


def verify_sync(hashed: str, password: str) -> bool:
    hasher = _get_hasher()
    from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

    try:
        return hasher.verify(hashed, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


async def hash_password(password: str) -> str:
    return await anyio.to_thread.run_sync(hash_sync, password, limiter=_get_limiter())


async def verify(hashed: str, password: str) -> bool:
    return await anyio.to_thread.run_sync(verify_sync, hashed, password, limiter=_get_limiter())
