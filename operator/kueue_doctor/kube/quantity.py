"""Exact Kubernetes quantities (Decimal, never float), formatted the way Kueue prints them."""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation
from functools import lru_cache

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
        return _bounded(Decimal(text))
    if isinstance(text, float):  # an unquoted `cpu: 0.5` in a hand-written YAML file: the number it says
        return _parse(repr(text))
    if type(text) is not str or not text or text == UNLIMITED or len(text) > 64:
        return None
    return _parse(text)


# The suffixes of the Python client's kubernetes.utils.quantity.parse_quantity, which multiplies the number by
# `base ** Decimal(exponent)` of its suffix, a Decimal power computed on every call: here each suffix's factor is
# that same expression, computed once
_EXPONENTS = {"n": -3, "u": -2, "m": -1, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_BINARY_PREFIXES = "KMGTPE"
_FACTORS: dict[str, Decimal] = {
    **{p: 1000 ** Decimal(e) for p, e in _EXPONENTS.items()},
    **{f"{p}i": 1024 ** Decimal(e) for p, e in _EXPONENTS.items() if p in _BINARY_PREFIXES},
}


@lru_cache(maxsize=4096)
def _parse(text: str) -> Decimal | None:
    """parse_quantity's reading (the same suffixes, the same Decimal, None where it raises)."""
    quantity = text.strip()
    number, factor = quantity, None
    if len(quantity) >= 2 and quantity[-1] == "i":
        if quantity[-2] in _EXPONENTS:
            number, factor = quantity[:-2], _FACTORS.get(quantity[-2:])
            if factor is None:  # "ki", "mi": no binary suffix
                return None
    elif len(quantity) >= 1 and quantity[-1] in _EXPONENTS:
        number, factor = quantity[:-1], _FACTORS[quantity[-1]]
    try:
        value = Decimal(number)
        return _bounded(value if factor is None else value * factor)
    except (ValueError, TypeError, InvalidOperation, ArithmeticError):
        return None


# What an apiserver stores: no magnitude above 2^63-1 (larger values are capped), no precision below 1n (rounded
# up), never NaN or Infinity, which Decimal reads but no Quantity holds (and which would make every sum and
# comparison raise)
_MAX = Decimal(2**63 - 1)
_NANO = Decimal("1e-9")


def _bounded(value: Decimal) -> Decimal | None:
    if not value.is_finite():
        return None
    if value > _MAX or value < -_MAX:
        return _MAX if value > 0 else -_MAX
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -9:
        return value.quantize(_NANO, rounding=ROUND_CEILING)
    return value


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
    # a count (GPUs, pods) whole, as an SRE counts it: 1000, where Kueue prints 1k; as exact
    return _plain(value) if value != value.to_integral_value() or abs(value) < _COUNT_SUFFIX_FROM \
        else _with_suffix(value, _DECIMAL)


_COUNT_SUFFIX_FROM = Decimal(10**9)  # below, a count prints whole; a larger one keeps its suffix (10G, not 11 digits)


@lru_cache(maxsize=8192)
def readable(resource: str, value: Decimal | None) -> str | None:
    """A quantity for a sentence: `format_quantity`, except bytes, in the largest binary unit they reach and to three
    significant digits when they are not a whole number of it (9262144000 is "8.63Gi", which `format_quantity` can
    only give as "9262144000"; 8G is "7.45Gi", not "7812500Ki"). Not exact: status fields, figures read back and
    commands keep `format_quantity`. Memoized like it: the engine's `quota.fmt`, asked thousands of times a pass."""
    if value is None or not is_binary_resource(resource) or value == 0:
        return format_quantity(resource, value)
    size = abs(value)
    for suffix, factor in _BINARY:
        if size >= factor:
            amount = value / factor
            if amount == amount.to_integral_value():
                return f"{int(amount)}{suffix}"
            digits = 3 - len(str(int(abs(amount))))  # three significant digits: 8.63, 86.3, 863
            return f"{_plain(round(amount, max(digits, 0)))}{suffix}"
    return format_quantity(resource, value)


def _with_suffix(value: Decimal, table: tuple[tuple[str, int], ...]) -> str:
    if value == 0 or value != value.to_integral_value():
        return _plain(value)
    if -_EXACT < value < _EXACT:  # whole and this small: int arithmetic, as exact, without a conversion per try
        whole = int(value)
        for suffix, factor in table:
            if whole % factor == 0:
                return f"{whole // factor}{suffix}"
        return str(whole)
    for suffix, factor in table:
        if value % factor == 0:
            return f"{int(value // factor)}{suffix}"
    return str(int(value))


_EXACT = 10**18


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
