"""Kafka's ``sasl.jaas.config`` value: one JAAS login module entry, ``<class> <flag> key="value" ...;``. Pure.

Kafka reads it with Java's ``StreamTokenizer`` (its ``JaasConfig``): words, ``=``, double-quoted strings with
backslash escapes, and a closing ``;``; exactly one entry per property. The same grammar here, with errors that say
where the text goes wrong, so that a Kafka ``server.properties`` line means the same on our broker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasEntry", "JaasError", "parse_jaas"]

FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))', re.DOTALL)


class JaasError(ValueError):
    """The text is not one JAAS login module entry; the message says what was expected where."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options may hold passwords
        return f"JaasEntry(module={self.module!r}, flag={self.flag!r}, options={sorted(self.options)!r})"


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError(f"sasl.jaas.config: cannot read {text[pos:pos + 20].strip()!r} (an unclosed quote?)")
        if m["quoted"] is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", m["quoted"][1:-1], flags=re.DOTALL)))
        elif m["word"] is not None:
            out.append(("word", m["word"]))
        else:
            out.append((m["punct"], m["punct"]))
        pos = m.end()
    return out


def parse_jaas(text: str) -> JaasEntry:
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasError(f"sasl.jaas.config must be '<LoginModule class> <flag> [key=\"value\" ...];', got {text.strip()[:60]!r}")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in FLAGS:
        raise JaasError(f"sasl.jaas.config: {tokens[1][1]!r} after {module} is not a control flag ({', '.join(FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in (
            "word",
            "value",
        ):
            raise JaasError(f"sasl.jaas.config: expected key=\"value\" or ';' after {module} {flag}, at "
                            f"{tokens[i][1]!r}")  # fmt: skip
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise JaasError("sasl.jaas.config must end with ';'")
    if i + 1 != len(tokens):
        raise JaasError("sasl.jaas.config has more than one login module entry (give exactly one)")
    return JaasEntry(module, flag, options)
