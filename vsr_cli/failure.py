"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class CliError(Exception):
    """A user-facing error: its message is printed as one line, without a traceback."""

    exit_code = 1


class CliUsageError(CliError):
    """A wrong option value (an unknown study slug, ...): one line and exit 2, as for usage."""

    exit_code = 2
