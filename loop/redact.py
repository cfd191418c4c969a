"""Redaction: the values of secret-looking environment variables, out of what is written.

One redaction for every file a session writes: the session journal
(``.loop/sessions/ID/journal.jsonl``) and the recording both pass their lines through
:func:`redact_line`. A variable whose name contains ``KEY``, ``TOKEN``, ``SECRET`` or
``PASSWORD`` (any case) and whose value has at least :data:`MIN_SECRET_LENGTH`
characters and is not a number is a secret; every occurrence of its value in a written
string becomes ``[redacted:NAME]``. Shorter values and numbers are settings, not secrets
(``TOKENIZERS_PARALLELISM=false``, ``CLAUDE_CODE_MAX_OUTPUT_TOKENS=32000``, a mock's
``API_KEY=test``): masking them would rewrite every ``false``, ``32000`` or ``pytest``
in the prompts and outputs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from loop import _json

__all__ = ["MIN_SECRET_LENGTH", "Redactor", "redact_line"]

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
MIN_SECRET_LENGTH = 8


def _is_secret(name: str, value: object) -> bool:
    """Whether the variable ``name=value`` holds a secret to keep out of written files."""
    return (
        isinstance(value, str)
        and _SECRET_NAME.search(name) is not None
        and len(value) >= MIN_SECRET_LENGTH
        and _NUMBER.fullmatch(value) is None
    )


class Redactor:
    """Replaces the values of secret-looking environment variables in strings."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.secrets: list[tuple[str, str]] = []
        self.learn(environ)

    def learn(self, environ: Mapping[str, Any]) -> None:
        """Add the secret-looking entries of ``environ`` to what is redacted."""
        found = set(self.secrets) | {(v, k) for k, v in environ.items() if _is_secret(k, v)}
        # Longest first, so a secret containing another is replaced whole.
        self.secrets = sorted(found, key=lambda p: (-len(p[0]), p[1]))
        # Each secret as it appears inside a JSON string, in both of the codec's forms
        # (UTF-8, and ASCII escapes for text with a lone surrogate): a string holding the
        # secret holds this in the encoded line, since JSON escapes character by character.
        self._needles = sorted(
            {
                json.dumps(v, ensure_ascii=ascii)[1:-1].encode("utf-8", "surrogatepass")
                for v, _ in self.secrets
                for ascii in (False, True)
            }
        )

    def found_in(self, line: bytes) -> bool:
        """Whether an encoded JSON ``line`` may hold a secret in one of its strings.

        Never false when a string holds one; true also when only a number, a key or a
        literal matches (redacting the parsed values then changes nothing there).
        """
        return bool(self._needles) and any(needle in line for needle in self._needles)

    def learn_from_config(self, data: Any) -> None:
        """Add secrets set in the config itself: every ``env`` table of a backend."""
        if isinstance(data, dict):
            for key, value in data.items():
                if key == "env" and isinstance(value, dict):
                    self.learn(value)
                else:
                    self.learn_from_config(value)
        elif isinstance(data, list):
            for item in data:
                self.learn_from_config(item)

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by ``[redacted:NAME]``."""
        for secret, name in self.secrets:
            if secret in value:
                value = value.replace(secret, f"[redacted:{name}]")
        return value

    def value(self, data: Any) -> Any:
        """A copy of JSON data with every string (not keys or numbers) redacted."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {k: self.value(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.value(v) for v in data]
        return data


def redact_line(line: bytes, redactor: Redactor | None) -> bytes:
    """An encoded JSON record ``line`` with every secret in its strings redacted.

    The values are redacted, never the encoded text: a secret may also match inside a
    number, a key or a literal, and replacing it there would break the line. A line that
    holds no secret (the common case: one scan) is returned as it is.
    """
    if redactor is None or not redactor.found_in(line):
        return line
    return _json.dumps_record_line(redactor.value(_json.loads(line)))
