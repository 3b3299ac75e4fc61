"""Errors the collector raises for bad input (the CLI turns them into one-line messages)."""

from __future__ import annotations


class CollectError(Exception):
    """Input that cannot be collected (exit status 2 on the command line)."""


class CampaignNotFound(CollectError):
    """No such campaign folder, or no campaign at all under the results root."""


class LogFormatError(CollectError):
    """A rank log of a format version this ddlbench does not read, or mixed versions."""
