"""kvplan command line (the commands are moving to one module each: see the next commit)."""

from kvplan.cli.check import app, app_for, check, handles_errors, main

__all__ = ["app", "app_for", "check", "handles_errors", "main"]
