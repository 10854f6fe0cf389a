"""The errors of `surfaces`, each in one place (docs/design.md, "Typed values"): one base class,
`SurfaceError`, and every error class of the package under it. The modules that raise them import
them from here, and re-export them under their old names."""

from __future__ import annotations


class SurfaceError(Exception):
    """An error of the tool layer: a declaration, a tool's input, an MCP server, a probe."""


class ContextToolError(SurfaceError, ValueError):
    """Bad input to a context tool; the message says what to fix."""


class ToolInputError(SurfaceError, ValueError):
    """A tool call was refused for its input; nothing was written."""


class McpToolError(SurfaceError):
    """The server answered the call with `isError: true`; the message is its text."""


class McpUnavailable(SurfaceError):
    """The server is not answering: the call is not made."""


class Escape(SurfaceError):
    """A target that resolves outside every configured root."""


class ProbeSpecError(SurfaceError, ValueError):
    """A probe specification is malformed (bad mode, a needle where none belongs, ...)."""


class DeclarationError(SurfaceError):
    """A tool declaration is malformed; startup stops. The message names the tool."""
