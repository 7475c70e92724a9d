"""Exact Kubernetes quantities (Decimal, never float), formatted the way Kueue prints them."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import lru_cache

from kubernetes.utils.quantity import parse_quantity

UNLIMITED = "<unlimited>"
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def parse(text: object) -> Decimal | None:
    """Parse a quantity; None for anything that is not one (bad input never raises)."""
    if type(text) is str:  # the common case first: two isinstance checks fewer per quantity read
        return _parse(text) if text and text != UNLIMITED and len(text) <= 64 else None
    if isinstance(text, bool) or text is None:
        return None
    if isinstance(text, int):
        return Decimal(text)
    if type(text) is not str or not text or text == UNLIMITED or len(text) > 64:
        return None
    return _parse(text)


@lru_cache(maxsize=4096)
def _parse(text: str) -> Decimal | None:
    try:
        value = parse_quantity(text.strip())  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, InvalidOperation, ArithmeticError):
        return None
    return value if isinstance(value, Decimal) else Decimal(value)


def is_binary_resource(resource: str) -> bool:
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


@lru_cache(maxsize=8192)
def format_quantity(resource: str, value: Decimal | None) -> str | None:
    """Render like Kueue's resource formatter: cpu in milli-units, memory binary, others plain."""
    if value is None:
        return None
    if is_binary_resource(resource):
        return _with_suffix(value, _BINARY)
    if resource == "cpu":
        if value == value.to_integral_value():
            return str(int(value))
        milli = value * 1000
        if milli == milli.to_integral_value():
            return f"{int(milli)}m"
        return _plain(value)
    return _plain(value) if value != value.to_integral_value() else _with_suffix(value, _DECIMAL)


def _with_suffix(value: Decimal, table: tuple[tuple[str, int], ...]) -> str:
    if value == 0 or value != value.to_integral_value():
        return _plain(value)
    for suffix, factor in table:
        if value % factor == 0:
            return f"{int(value // factor)}{suffix}"
    return str(int(value))


def _plain(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text


def add(*values: Decimal | None) -> Decimal | None:
    total = Decimal(0)
    for v in values:
        if v is None:
            return None
        total += v
    return total
