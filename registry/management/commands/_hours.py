"""Parsing of the ``--...-hours`` options shared by the storage lifecycle commands."""
from __future__ import annotations

import argparse
import math


def hours(text: str) -> float:
    """A non-negative number of hours (fractions allowed), for argparse ``type=``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of hours, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number of hours, got {text!r}")
    return value
