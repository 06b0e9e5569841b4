"""Errors the sampler raises; each message is one line a user can act on."""

from __future__ import annotations


class SamplerError(Exception):
    """Base class: the CLI prints the message as one line, the dashboard shows it."""


class CocoFileError(SamplerError):
    """A COCO file is missing, unreadable, not JSON, or not a COCO instances file."""


class UnknownCategoryError(SamplerError):
    """A category name the user asked for is not in the loaded COCO files."""
