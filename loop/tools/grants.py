"""Per-iteration secrets for the session's MCP endpoint: who may call, in whose name.

The loop hands each running iteration's child processes a secret of their own
(``LOOP_MCP_TOKEN``). A call that presents it (``Authorization: Bearer <token>``)
runs in that iteration's :class:`~loop.tools.base.ToolContext`: ``emit_event``
appends to that iteration's events file, ``get_session_status`` reports that
session, and every other call is journaled as part of that iteration (in its events
file, channel ``mcp``). When the iteration's backend call ends, its secret is revoked, so an
agent left over from an earlier iteration can no longer write into a later one.
Several iterations may hold secrets at once; each names its own.

Only a SHA-256 digest of each secret is kept. A lookup hashes what the caller
presented and finds that digest, so nothing here compares secrets byte by byte.
Pure: no server, no SDK.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass, replace

from loop.extensions import RunningIteration
from loop.tools.base import ToolContext
from loop.tools.calls import FileCalls

__all__ = ["TOKEN_BYTES", "Grant", "GrantTable", "bearer_token"]

TOKEN_BYTES = 32  # 256 bits of randomness per secret


@dataclass(frozen=True, slots=True)
class Grant:
    """What one secret allows: calls in one running iteration's context.

    Attributes:
        name: ``<session>/<iteration>/<hat>``, for logs (never the secret).
        iteration: the iteration the secret was made for.
        context: the tool context its calls run in.
    """

    name: str
    iteration: RunningIteration
    context: ToolContext


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else ``None``."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class GrantTable:
    """The live secrets of a session, keyed by their digests (thread-safe).

    Args:
        base: the loop's tool context; a grant's context is this one with the
            iteration's events file and session folder (the in-memory stores and
            the file locations are shared).
    """

    def __init__(self, base: ToolContext) -> None:
        self._base = base
        self._by_digest: dict[bytes, Grant] = {}
        self._digests: dict[tuple[str, int], bytes] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_digest)

    def mint(self, iteration: RunningIteration) -> str:
        """A new secret for ``iteration``; any earlier one of the same iteration is revoked."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        grant = Grant(
            name=f"{iteration.session_id}/{iteration.iteration}/{iteration.hat}",
            iteration=iteration,
            context=replace(
                self._base,
                events_file=iteration.events_file,
                session_dir=iteration.session_dir,
                calls=FileCalls(
                    iteration.session_id,
                    iteration.iteration,
                    iteration.events_file,
                    "mcp",
                    session_dir=iteration.session_dir,
                ),
            ),
        )
        key = (iteration.session_id, iteration.iteration)
        digest = _digest(token)
        with self._lock:
            old = self._digests.pop(key, None)
            if old is not None:
                self._by_digest.pop(old, None)
            self._digests[key] = digest
            self._by_digest[digest] = grant
        return token

    def revoke(self, iteration: RunningIteration) -> bool:
        """Void ``iteration``'s secret; ``False`` when it had none."""
        with self._lock:
            digest = self._digests.pop((iteration.session_id, iteration.iteration), None)
            if digest is None:
                return False
            self._by_digest.pop(digest, None)
            return True

    def lookup(self, token: str | None) -> Grant | None:
        """The grant of a live ``token``; ``None`` for a missing, unknown or revoked one."""
        if not token:
            return None
        return self._by_digest.get(_digest(token))

    def authorize(self, authorization: str | None) -> Grant | None:
        """The grant of an ``Authorization`` header value (``Bearer <token>``), if live."""
        return self.lookup(bearer_token(authorization))
