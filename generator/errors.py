"""Errors of the command line that belong to no stage (a bad combination of options).

Its own module so that the subcommands registered by `mbforge.cli` (simulate, demo, ...)
can raise it without importing the CLI back. `mbforge.cli.main` prints it as one line
with exit status 2, as it does the stages' own errors (ModelError, GenerateError, ...).
"""


class CLIError(Exception):
    """A user error reported as one line, exit status 2."""
