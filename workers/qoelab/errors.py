"""Errors a user should read as one clear sentence, never as a traceback."""


class QoelabError(Exception):
    """A problem the user can act on; str(err) is the whole message."""


class ParameterError(QoelabError, ValueError):
    """A parameter is out of its bounds or cannot be parsed; names the field and the bound."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class MissingToolError(QoelabError):
    """A program or Debian package the trial needs is not installed."""

    def __init__(self, tool: str, package: str | None = None) -> None:
        self.tool = tool
        self.package = package or tool
        super().__init__(f"{tool} is not installed; install the Debian package '{self.package}'")


class PrivilegeError(QoelabError):
    """The worker lacks a capability (usually CAP_NET_ADMIN)."""
