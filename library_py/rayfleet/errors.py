# SPDX-License-Identifier: GPL-3.0-or-later
"""Exceptions with messages a cluster operator can act on."""

from __future__ import annotations


class RayfleetError(Exception):
    """Base class: the message says what failed, where, expected vs found, and what to try."""


class SettingsError(RayfleetError, ValueError):
    """A Ray node setting is invalid (names the setting, the value and what was expected)."""


class ClusterWaitTimeout(RayfleetError, TimeoutError):
    """The cluster did not reach the wanted membership in time (names the missing hosts)."""

    def __init__(self, message: str, state: object | None = None):
        super().__init__(message)
        self.state = state
