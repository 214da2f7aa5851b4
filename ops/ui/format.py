"""Template filters for the UI (``{% load ui %}``): binary sizes, relative times, short digests."""
from __future__ import annotations

from datetime import datetime, timezone as dt_timezone

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ops.ui import labels

register = template.Library()

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


@register.filter
def size(value: int | None) -> str:
    """1536 -> "1.5 KiB"; bytes below 1 KiB stay exact."""
    if value is None:
        return "—"
    amount = float(value)
    if amount < 1024:
        return f"{int(amount)} B"
    for unit in _UNITS:
        amount /= 1024
        if amount < 1024 or unit == _UNITS[-1]:
            return f"{amount:.1f} {unit}" if amount < 100 else f"{amount:.0f} {unit}"
    raise AssertionError("unreachable")


def _span(seconds: float) -> str:
    # Days and longer round to the nearest unit: a 7-day token created a second ago expires "in 7
    # days", not "in 6 days".
    for limit, unit, per in (
        (3600, "minute", 60),
        (86400 - 1800, "hour", 3600),
        (86400 * 30, "day", 86400),
        (86400 * 365, "month", 86400 * 30),
        (float("inf"), "year", 86400 * 365),
    ):
        if seconds < limit:
            count = max(1, int(seconds // per) if per < 86400 else round(seconds / per))
            return f"{count} {unit}{'' if count == 1 else 's'}"
    raise AssertionError("unreachable")


def relative(moment: datetime, now: datetime | None = None) -> str:
    delta = ((now or timezone.now()) - moment).total_seconds()
    if abs(delta) < 60:
        return "just now"
    return f"{_span(delta)} ago" if delta > 0 else f"in {_span(-delta)}"


@register.filter
def ago(moment: datetime | None) -> SafeString | str:
    """A <time> element reading "3 hours ago", with the exact UTC time on hover."""
    if moment is None:
        return "—"
    exact = moment.astimezone(dt_timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html('<time datetime="{}" title="{}">{}</time>', moment.isoformat(), exact,
                       relative(moment))


@register.filter
def utc(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.astimezone(dt_timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


@register.filter
def mirror_of(name: str) -> str:
    """The upstream a pull-through cache's repository mirrors (registry.proxy), or ""."""
    from registry.proxy.mirrors import find

    mirror = find(name)
    return f"{mirror.url}/{mirror.upstream_name(name)}" if mirror is not None and name != mirror.prefix else ""


@register.filter
def short_digest(digest: str) -> str:
    """sha256:0123456789abcdef... -> sha256:0123456789ab (what people compare by eye)."""
    algorithm, _, hex_part = (digest or "").partition(":")
    return f"{algorithm}:{hex_part[:12]}" if hex_part else digest


@register.filter
def media_label(media_type: str) -> str:
    return labels.media_type(media_type)


@register.filter
def artifact_label(artifact_type: str) -> str:
    return labels.artifact_type(artifact_type)
