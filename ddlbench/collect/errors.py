"""Errors the collector raises for bad input (the CLI prints them in one line, exit 2)."""

from __future__ import annotations

from ddlbench.errors import InputError


class CollectError(InputError):
    """Input that cannot be collected (exit status 2 on the command line)."""

    def __init__(self, message: str):
        super().__init__(message)


class CampaignNotFound(CollectError):
    """No such campaign folder, or no campaign at all under the results root."""


class LogFormatError(CollectError):
    """A rank log of a format version this ddlbench does not read, or mixed versions."""
