"""Device names and ``nvidia-smi topo -m`` tokens: the one definition of each, for every module.

* **Name order.** Devices are listed in natural order: ``GPU2`` before ``GPU10``, ``mlx5_9`` before
  ``mlx5_10`` (:func:`natural_key`). A GPU pair is stored once, under :func:`pair_key` (its two
  names in natural order), and read back with :func:`cell` from a ``{row: {col: value}}`` matrix
  whichever direction it was written in.
* **Tokens.** A matrix cell as printed becomes its modern spelling with :func:`normalize_token`
  (``SOC`` -> ``SYS``, ``" X "`` -> ``X``, ``NV012`` -> ``NV12``). Distance classes are ranked
  closest first along :data:`TOKEN_ORDER` (domain.md 3.1: ``X`` < ``NV#`` < ``PIX`` < ``PXB`` <
  ``PHB`` < ``NODE`` < ``SYS``); :data:`PCIE_CLASSES` are the PCIe/CPU ones and
  :func:`path_rank` gives a token's place.

Nothing here knows graphs or parser records: names are strings, matrices plain dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

__all__ = ["natural_key", "natural_sorted", "pair_key", "cell", "normalize_token", "nv_count", "path_rank",
           "TOKEN_ORDER", "PCIE_CLASSES"]

_DIGITS = re.compile(r"([0-9]+)")
_NV = re.compile(r"NV([0-9]{1,4})")

#: Distance classes, closest first (domain.md 3.1). ``NV#`` stands for every ``NV<n>``.
TOKEN_ORDER: tuple[str, ...] = ("X", "NV#", "PIX", "PXB", "PHB", "NODE", "SYS")
#: The PCIe/CPU classes (what ``topo -mp`` prints), closest first.
PCIE_CLASSES: tuple[str, ...] = TOKEN_ORDER[2:]
_RANK = {tok: i for i, tok in enumerate(TOKEN_ORDER)}


@lru_cache(maxsize=65536)  # device names repeat across the pairs, findings and documents
def natural_key(name: Any) -> tuple:
    """Sort key of a device name: its text and number runs, numbers compared as numbers.

    Keys of any two names compare (text and numbers alternate at the same places).

    >>> sorted(["GPU10", "GPU2", "mlx5_10", "mlx5_9", "NIC1"], key=natural_key)
    ['GPU2', 'GPU10', 'NIC1', 'mlx5_9', 'mlx5_10']
    """
    text = name if type(name) is str else str(name)
    return tuple(int(t) if i % 2 else t for i, t in enumerate(_DIGITS.split(text)))


def natural_sorted(names: Iterable[Any]) -> list:
    """``names`` in natural order (:func:`natural_key`)."""
    return sorted(names, key=natural_key)


@lru_cache(maxsize=65536)
def pair_key(a: str, b: str) -> tuple[str, str]:
    """The one key of an unordered pair: both names in natural order.

    >>> pair_key("GPU10", "GPU2")
    ('GPU2', 'GPU10')
    """
    return (a, b) if natural_key(a) <= natural_key(b) else (b, a)


def cell(matrix: Mapping[str, Mapping[str, Any]] | None, a: str, b: str) -> Any:
    """The value of pair ``a``-``b`` in a ``{row: {col: value}}`` matrix: row ``a`` column ``b``,
    else row ``b`` column ``a`` (a matrix printed with one triangle, or a cell lost in one
    direction); None when neither holds a value.

    >>> cell({"GPU0": {"GPU1": "PIX"}}, "GPU1", "GPU0")
    'PIX'
    """
    if not matrix:
        return None
    found = (matrix.get(a) or {}).get(b)
    return found if found else (matrix.get(b) or {}).get(a)


def normalize_token(token: Any) -> str | None:
    """A ``topo -m`` cell as printed -> its modern spelling; None when empty.

    >>> [normalize_token(t) for t in (" X ", "SOC", "nv012", "PXB", "", None)]
    ['X', 'SYS', 'NV12', 'PXB', None, None]
    """
    if token is None:
        return None
    return _normalized(token) if type(token) is str else _normalized(str(token))


@lru_cache(maxsize=4096)  # a matrix repeats a handful of tokens
def _normalized(token: str) -> str | None:
    t = token.strip().upper()
    if not t:
        return None
    if t == "SOC":
        return "SYS"
    if t.startswith("NV") and t[2:].isdigit() and t[2:].isascii():
        return f"NV{int(t[2:])}"
    return t


def nv_count(token: Any) -> int | None:
    """Bonded NVLinks of an ``NV<n>`` token (``"NV18"`` -> 18); None for any other token."""
    m = _NV.fullmatch(normalize_token(token) or "")
    return int(m.group(1)) if m else None


def path_rank(token: Any) -> int:
    """Place of a distance token along :data:`TOKEN_ORDER` (0 = ``X`` ... 6 = ``SYS``/``SOC``);
    every ``NV<n>`` ranks as ``NV#``. Raises ``ValueError`` for anything else (P2P tokens).

    >>> path_rank("NV18") < path_rank("PIX") < path_rank("SOC")
    True
    """
    norm = normalize_token(token) or ""
    if _NV.fullmatch(norm):
        return _RANK["NV#"]
    try:
        return _RANK[norm]
    except KeyError:
        raise ValueError(f"{token!r} is not a topo -m distance token ({', '.join(TOKEN_ORDER)})") from None
