"""The CLI's one error type, in its own module so subcommand modules can raise it without importing main."""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; printed without a traceback."""
