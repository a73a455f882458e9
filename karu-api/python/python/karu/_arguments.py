"""Checks and shapes of read arguments, before anything reaches the native client."""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ._errors import InvalidRange


_LARGEST = 2**64 - 1


def _byte_counts(**counts) -> Optional[InvalidRange]:
    """An :class:`InvalidRange` naming the first of ``counts`` (an offset, a length) that no
    read can have: a negative int, or one past the largest Karu addresses; ``None`` when each
    fits (what is not an int is left to the native call, which raises ``TypeError``)."""
    for name, value in counts.items():
        if isinstance(value, int) and not 0 <= value <= _LARGEST:
            why = "negative" if value < 0 else "past the largest Karu can address (2**64 - 1)"
            return InvalidRange(f"invalid_range: {name} {value} is {why}")
    return None


def _check_byte_counts(**counts) -> None:
    """Raise :func:`_byte_counts`' exception, if any."""
    error = _byte_counts(**counts)
    if error is not None:
        raise error


def _check_in_flight(max_in_flight) -> None:
    """``TypeError``/``ValueError`` unless ``max_in_flight`` is ``None`` or an int >= 1."""
    if max_in_flight is None:
        return
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
        raise TypeError(
            f"max_in_flight takes an int or None, found {type(max_in_flight).__name__}"
        )
    if not 1 <= max_in_flight <= _LARGEST:
        raise ValueError(f"max_in_flight takes a number from 1 to 2**64 - 1, found {max_in_flight}")


def _check_gap(max_gap, name: str = "max_gap") -> None:
    """Refuse a merge gap (or span, ``name``) no batch can have, naming it."""
    if max_gap is None:
        return
    if isinstance(max_gap, bool) or not isinstance(max_gap, int):
        raise TypeError(f"{name} takes an int (bytes) or None, found {type(max_gap).__name__}")
    if not 0 <= max_gap <= _LARGEST:
        raise ValueError(f"{name} takes bytes from 0 to 2**64 - 1, found {max_gap}")


def _split_reads(items, strict: bool):
    """The ``(address, offset, length, if_match)`` reads a batch can take, and by position the
    :class:`InvalidRange` of each of the others (raised at once instead if ``strict``)."""
    good, bad = [], {}
    for position, item in enumerate(items):
        error = _byte_counts(offset=item[1], length=item[2])
        if error is None:
            good.append(item)
        elif strict:
            raise error
        else:
            bad[position] = error
    return good, bad


def _merge_results(results, bad, count: int) -> list:
    """``results`` of the reads a batch took, with the failures of the others at their places."""
    taken = iter(results)
    return [bad[position] if position in bad else next(taken) for position in range(count)]


def _shape(index: int, read, fourth: str) -> None:
    """Refuse a read that is not a tuple of three or four items, naming it."""
    if len(read) not in (3, 4):
        raise ValueError(
            f"read {index}: expected (address, offset, length) or (address, offset, length, "
            f"{fourth}), got {len(read)} items"
        )


def _batch_items(reads) -> List[Tuple[str, int, int, Optional[str]]]:
    items = []
    for index, read in enumerate(reads):
        _shape(index, read, "if_match")
        if len(read) == 3:
            address, offset, length = read
            if_match = None
        else:
            address, offset, length, if_match = read
        items.append((os.fspath(address), offset, length, if_match))
    return items
