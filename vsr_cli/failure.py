"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class CliError(Exception):
    """A user-facing error: its message is printed as one line, without a traceback."""
