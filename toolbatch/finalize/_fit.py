"""Fitting one text slot into its allocation: the one preview format of ``toolbatch._core``.

The finalizer writes the same preview as every producer (a header, the artifact paths, a
head and a tail), so a producer's preview and the finalizer's are one format, and a slot
that already holds a preview is cut from the excerpt it kept instead of nesting a header.
"""

from __future__ import annotations

from toolbatch._core import (
    ARTIFACT_LINE_PREFIX,
    HEAD_DIVISOR,
    PREVIEW_SEPARATOR,
    TRUNCATION_HEADER,
    Excerpt,
    Preview,
    TextCutter,
    cut_ends,
    cut_text,
    fit_excerpt,
    fit_text,
    omission_marker,
)

__all__ = [
    "ARTIFACT_LINE_PREFIX",
    "HEAD_DIVISOR",
    "PREVIEW_SEPARATOR",
    "TRUNCATION_HEADER",
    "Excerpt",
    "Preview",
    "TextCutter",
    "cut_ends",
    "cut_text",
    "fit_excerpt",
    "fit_text",
    "omission_marker",
]
