"""The `[tools.mcp.<server>]` tables: one MCP server each (docs/tools.md, "MCP servers").

A server is started over stdio (`command`, `args`, `env`, `cwd`) or reached over streamable HTTP
(`url`, `headers`); secrets are never written in the file: `env_credentials` and
`header_credentials` name credentials read the way every wake secret is (systemd's
`$CREDENTIALS_DIRECTORY`, else the upper-cased environment variable), when the server is started.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FlowLabel = Literal["untrusted_input", "private_data", "egress"]  # surfaces.flow_labels.LABELS
SERVER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")  # as surfaces.mcp.SERVER_NAME


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    env_credentials: dict[str, str] = {}  # environment variable of the server -> credential name
    cwd: str | None = None  # relative to the config file's directory
    url: str | None = None
    headers: dict[str, str] = {}
    header_credentials: dict[str, str] = {}  # HTTP header -> credential name
    # glob over the server's own tool names -> the surfaces those tools declare; a tool no glob
    # matches is registered with no surface and never bound
    surfaces: dict[str, tuple[str, ...]] = {}
    # glob -> mutates, over the tool's annotations (readOnlyHint true: false; otherwise true)
    mutates: dict[str, bool] = {}
    # a declaration that differs from its pin: strict (not bound until accepted), warn (bound,
    # finding raised), off (only the manifest changes)
    pin: Literal["strict", "warn", "off"] = "strict"
    # globs over the server's tool names whose calls are not run in the wake that made them: each
    # waits for an operator's decision (docs/approvals.md)
    requires_approval: tuple[str, ...] = ()
    # glob -> flow labels (untrusted_input, private_data, egress): replace the labels the tool's
    # annotations give (docs/tools.md, "Flow labels"); the last matching glob wins
    flows: dict[str, tuple[FlowLabel, ...]] = {}
    start_timeout_s: float = Field(15.0, gt=0)
    list_timeout_s: float = Field(10.0, gt=0)
    call_timeout_s: float = Field(30.0, gt=0)
    ping_interval_s: float = Field(30.0, gt=0)
    restart_max_s: float = Field(60.0, gt=0)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parsed = urllib.parse.urlsplit(value)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"expected an http:// or https:// URL with a host, got {value[:80]!r} ({len(value)} characters)")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("expected exactly one of command (stdio) or url (streamable HTTP)")
        if self.command is not None and not self.command.strip():
            raise ValueError("expected a non-empty command")
        if self.url is None and (self.headers or self.header_credentials):
            raise ValueError("headers apply to a url server only")
        return self
