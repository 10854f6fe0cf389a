"""`[anchor]`: the timestamp authority that anchors each agent's chain head outside the database
(docs/ledger.md, "Anchored chain heads")."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from wake.config.values import _Model, check_http_url

DEFAULT_ANCHOR_INTERVAL_S = 86_400  # the daemon anchors once a day when `daemon = true`


class AnchorConfig(_Model):
    # An RFC 3161 timestamp authority's URL (HTTP POST of application/timestamp-query).
    tsa_url: str | None = None
    # The PEM file of the root certificate(s) a token's signer must chain to (relative to the
    # config file's directory); `wake verify --chain` checks every stored token against it.
    ca_file: str | None = None
    # The daemon anchors every agent's chain head this often (its side task; off unless true).
    daemon: bool = False
    interval_s: int = Field(DEFAULT_ANCHOR_INTERVAL_S, gt=0)
    timeout_s: float = Field(30.0, gt=0)

    @field_validator("tsa_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    @model_validator(mode="after")
    def _both(self) -> AnchorConfig:
        if (self.tsa_url is None) != (self.ca_file is None):
            raise ValueError("tsa_url and ca_file go together: the authority, and the root its tokens are checked against")
        if self.daemon and self.tsa_url is None:
            raise ValueError("daemon = true needs tsa_url and ca_file")
        return self
