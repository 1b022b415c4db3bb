"""Fetching what a Triton server serves over HTTP (statistics, metrics, configuration)."""

from __future__ import annotations

import http.client
import urllib.request

__all__ = ["is_url", "fetch"]


def is_url(source) -> bool:
    """Whether ``source`` is an http(s) URL to fetch rather than a path or text."""
    return isinstance(source, str) and source.startswith(("http://", "https://"))


def fetch(url: str, what: str, timeout: float = 10.0) -> bytes:
    """The body of ``url``, or a ValueError that names ``what`` and the URL."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.read()
    except (OSError, http.client.HTTPException) as err:   # InvalidURL is an HTTPException
        raise ValueError(f"{what} {url} could not be read: {err}") from None
