"""Anchored chain heads: RFC 3161 timestamp tokens over each agent's chain head, from an outside
timestamp authority (docs/ledger.md, "Anchored chain heads").

`anchor_heads` asks the authority (`[anchor] tsa_url`) for a token over each agent's head and
stores the authority's response beside it (`ledgers.chain_anchors`); `check` verifies every
stored response against the link the chain has now at that number, with `rfc3161-client`
(signature, signer chain to `[anchor] ca_file`, message imprint), and names the last anchored link
that still matches and the first row after it: a chain rewritten consistently in the database
no longer matches a token the authority signed over the old head.

What is timestamped is `message(agent, link, chain)`: the agent, the link number and the link's
hex value, one per line under a fixed first line, so a token cannot be moved to another agent or
another link.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
from cryptography import x509
from rfc3161_client import HashAlgorithm, TimestampRequestBuilder, VerificationError, VerifierBuilder, decode_timestamp_response
from rfc3161_client.tsp import PKIStatus, TimeStampRequest

from ledgers import chain_anchors, introspection
from wake.errors import ConfigError, StoreUnavailable

QUERY_TYPE = "application/timestamp-query"
MESSAGE_HEADER = "wake chain head v1"
MAX_REPLY_BYTES = 64 * 1024  # a timestamp response is a few kilobytes; anything larger is not one


def message(agent_id: str, chain_seq: int, chain: str) -> bytes:
    return f"{MESSAGE_HEADER}\n{agent_id}\n{chain_seq}\n{chain}\n".encode()


def roots(path: Path) -> list[x509.Certificate]:
    """The root certificates of `[anchor] ca_file`; a file that holds none is a config error."""
    try:
        found = x509.load_pem_x509_certificates(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), "anchor.ca_file", f"cannot read PEM certificates: {type(exc).__name__}: {str(exc)[:200]}") from None
    return found


@dataclass(frozen=True, kw_only=True)
class Token:
    response: bytes  # the authority's whole TimeStampResp, DER
    gen_time: dt.datetime


async def timestamp(client: httpx.AsyncClient, tsa_url: str, data: bytes, trusted: Sequence[x509.Certificate]) -> Token:
    """A token over `data` from the authority, checked before it is kept (its nonce, signature,
    signer chain and imprint): an authority that answers with something else is unavailable."""
    request = TimestampRequestBuilder().data(data).hash_algorithm(HashAlgorithm.SHA256).build()
    try:
        reply = await client.post(tsa_url, content=request.as_bytes(), headers={"Content-Type": QUERY_TYPE})
    except httpx.HTTPError as exc:
        raise StoreUnavailable("timestamp authority", tsa_url, f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if reply.status_code != 200 or len(reply.content) > MAX_REPLY_BYTES:
        raise StoreUnavailable("timestamp authority", tsa_url, f"answered HTTP {reply.status_code} with {len(reply.content)} bytes")
    return accepted(reply.content, request, data, trusted, tsa_url=tsa_url)


def accepted(answer: bytes, request: TimeStampRequest, data: bytes, trusted: Sequence[x509.Certificate], *, tsa_url: str) -> Token:
    """The authority's answer as a token, if it is one over `data` for this request (its nonce),
    signed by a certificate that chains to `trusted`; else `StoreUnavailable` naming why."""
    try:
        response = decode_timestamp_response(answer)
        if response.status not in (PKIStatus.GRANTED, PKIStatus.GRANTED_WITH_MODS):
            raise VerificationError(f"status {response.status}")
        builder = VerifierBuilder.from_request(request)
        for root in trusted:
            builder = builder.add_root_certificate(root)
        builder.build().verify_message(response, data)
        gen_time = response.tst_info.gen_time
    except (ValueError, VerificationError) as exc:
        why = " ".join(str(exc).split())[:200]
        raise StoreUnavailable("timestamp authority", tsa_url, f"its answer is not a valid token over the head: {why}") from None
    return Token(response=answer, gen_time=gen_time)


@dataclass(frozen=True, kw_only=True)
class Anchored:
    """An agent's chain head and, once it has one, its token's time."""

    agent_id: str
    chain_seq: int
    chain: str
    gen_time: dt.datetime | None  # None: not anchored at this link yet
    fresh: bool = False  # anchored by this call


async def heads(conn: asyncpg.Connection, agent_id: str | None = None) -> list[Anchored]:
    """Every agent's chain head (or one agent's); `gen_time` None: not anchored at that link yet."""
    agents = [agent_id] if agent_id else await introspection.chain_agents(conn)
    found: list[Anchored] = []
    for agent in agents:
        head = await introspection.chain_head(conn, agent)
        if head is None:
            continue
        known = {a.chain_seq: a.gen_time for a in await chain_anchors.of_agent(conn, agent)}
        found.append(Anchored(agent_id=agent, chain_seq=head[0], chain=head[1], gen_time=known.get(head[0]), fresh=False))
    return found


async def obtain(due: Sequence[Anchored], tsa_url: str, trusted: Sequence[x509.Certificate], *, timeout_s: float) -> list[tuple[Anchored, Token]]:
    """A token for each head not anchored yet, from the authority (no database connection held meanwhile)."""
    out = []
    async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as client:
        for head in due:
            if head.gen_time is None:
                out.append((head, await timestamp(client, tsa_url, message(head.agent_id, head.chain_seq, head.chain), trusted)))
    return out


async def store(conn: asyncpg.Connection, tokens: Sequence[tuple[Anchored, Token]], tsa_url: str, at: dt.datetime) -> list[Anchored]:
    """Store each token beside its head; the heads as anchored now (`fresh`)."""
    done = []
    for head, token in tokens:
        await chain_anchors.record(conn, head.agent_id, head.chain_seq, head.chain, tsa_url=tsa_url, token=token.response,
                                   gen_time=token.gen_time, at=at)
        done.append(dataclasses.replace(head, gen_time=token.gen_time, fresh=True))
    return done


async def anchor_heads(conn: asyncpg.Connection, tsa_url: str, trusted: Sequence[x509.Certificate], at: dt.datetime, *,
                       timeout_s: float, agent_id: str | None = None) -> list[Anchored]:
    """`wake verify --chain --anchor`: anchor every agent's head (or one agent's) not anchored at its
    link yet, on one connection; the heads anchored before come back with `fresh` false."""
    found = await heads(conn, agent_id)
    done = {(a.agent_id, a.chain_seq): a for a in await store(conn, await obtain(found, tsa_url, trusted, timeout_s=timeout_s), tsa_url, at)}
    return [done.get((a.agent_id, a.chain_seq), a) for a in found]


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """The first anchor the chain no longer matches."""

    anchor: chain_anchors.Anchor
    why: str
    last_good: int  # the last anchored link that still matches (0: none, the chain's start)
    first_suspect: introspection.ChainRow | None  # the first row after it: where a rewrite may begin


@dataclass(frozen=True, kw_only=True)
class AnchorCheck:
    agent_id: str
    anchors: int
    verified: int
    mismatch: Mismatch | None = None


def check(agent_id: str, rows: Sequence[introspection.ChainRow], anchors: Sequence[chain_anchors.Anchor],
          trusted: Sequence[x509.Certificate] | None) -> AnchorCheck:
    """Verify each stored token, in link order, over the link the chain holds now at its number.
    `trusted=None` (no `ca_file` configured): the tokens are counted, not verified."""
    if trusted is None:
        return AnchorCheck(agent_id=agent_id, anchors=len(anchors), verified=0)
    by_seq = {r.chain_seq: r for r in rows}
    verifier = VerifierBuilder()
    for root in trusted:
        verifier = verifier.add_root_certificate(root)
    built = verifier.build()
    last_good, verified = 0, 0
    for a in sorted(anchors, key=lambda a: a.chain_seq):
        row = by_seq.get(a.chain_seq)
        why = None
        if row is None:
            why = f"the chain has no link {a.chain_seq}, which was anchored at {a.gen_time.isoformat()}"
        else:
            try:
                built.verify_message(decode_timestamp_response(a.token), message(agent_id, a.chain_seq, row.chain))
            except (ValueError, VerificationError) as exc:
                why = (f"the token of link {a.chain_seq} (timestamped {a.gen_time.isoformat()} by {a.tsa_url}) does not verify over the link "
                       f"the chain has now ({row.chain[:16]}...): {str(exc)[:120]}")
        if why is not None:
            after = [r for r in rows if r.chain_seq > last_good]
            return AnchorCheck(agent_id=agent_id, anchors=len(anchors), verified=verified,
                               mismatch=Mismatch(anchor=a, why=why, last_good=last_good, first_suspect=after[0] if after else None))
        last_good, verified = a.chain_seq, verified + 1
    return AnchorCheck(agent_id=agent_id, anchors=len(anchors), verified=verified)


async def check_agent(conn: asyncpg.Connection, agent_id: str, trusted: Sequence[x509.Certificate] | None) -> AnchorCheck:
    return check(agent_id, await introspection.chain_rows(conn, agent_id), await chain_anchors.of_agent(conn, agent_id), trusted)
