"""Argument checks and seeds shared by the measure, theory and report modules.

Bad parameters raise ``ValueError`` naming the parameter. Every random draw comes from a
``seed`` argument: an int, a ``numpy.random.SeedSequence`` or a ``numpy.random.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

Seed = int | np.random.SeedSequence | np.random.Generator


def scalar(name: str, value: Any, *, low: float | None = None, strict: bool = False) -> float:
    """A finite real number, optionally ``>= low`` (``> low`` if ``strict``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x}")
    if low is not None and (x <= low if strict else x < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {x}")
    return x


def one_of(name: str, value: Any, options: Iterable[Any]) -> Any:
    """``value`` if it is one of ``options``; else an error naming ``name`` and the options."""
    allowed = list(options)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def kappa_value(kappa: Any) -> float:
    return scalar("kappa", kappa, low=0.0)


def integer(name: str, value: Any, *, low: int = 1) -> int:
    if isinstance(value, bool) or not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    n = int(value)
    if n < low:
        raise ValueError(f"{name} must be >= {low}, got {n}")
    return n


def array(name: str, values: Any, *, positive: bool = False, min_size: int = 1) -> np.ndarray:
    """A non-empty 1-D float64 array of finite values (strictly positive if asked)."""
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size < min_size:
        raise ValueError(f"{name} needs at least {min_size} value(s), got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values")
    if positive and np.any(a <= 0):
        raise ValueError(f"{name} must be strictly positive")
    return a


def rng(seed: Seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    return np.random.default_rng(integer("seed", seed, low=0))


def child_seeds(seed: Seed, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent, reproducible child seeds."""
    if isinstance(seed, np.random.Generator):
        return [np.random.SeedSequence(int(s)) for s in seed.integers(0, 2**63, size=n)]
    if isinstance(seed, np.random.SeedSequence):
        return seed.spawn(n)
    return np.random.SeedSequence(integer("seed", seed, low=0)).spawn(n)
