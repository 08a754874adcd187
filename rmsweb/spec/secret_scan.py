"""Find secrets written into a spec, by the shape of the value as well as by key names.

Specs are committed, and the compiler copies every value into params.yaml and
sky/*.yaml, so a token anywhere in a spec ends up in git. Key names alone miss a token
under a harmless name (`OPENAI_CREDS: sk-...`) or inside a URL. Three checks:

1. Known token prefixes (sk-, hf_, ghp_, AKIA, xox?-, AIza, glpat-, JWTs, PEM private
   keys, ...), matched anywhere in a value; the random part must mix upper case, lower
   case and digits, so `sk-learn-style-names` do not count.
2. Credentials in URLs: `scheme://user:password@host` and secret-bearing query
   parameters (`?token=`, `?api_key=`, `X-Amz-Signature=`, ...).
3. High-entropy strings: a run of >= 20 letters and digits with no separator that
   mixes upper case, lower case and digits, switches between them often (unlike
   CamelCase words) and has >= 3.7 bits of entropy per character. Hex strings (git SHAs, sha256/md5 hashes, UUIDs) are exempt: specs pin
   revisions by SHA, and a hex token is caught by its prefix or key name instead.
   Identifiers (`Qwen/Qwen3-VL-8B-Instruct`, `miniwob-cpu-retry-blind`, paths) are
   split by their separators into short words and never reach the threshold.

Findings print masked (first characters and length only): the error output itself
must not leak the secret into CI logs.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

KeyPath = tuple[str | int, ...]

# Key names of environment variables that hold secrets (compute.envs).
SECRET_NAME_PARTS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDS")


def secret_like_name(name: str) -> bool:
    return any(part in name.upper() for part in SECRET_NAME_PARTS)


# (what it is, pattern); group "body" is the random part that must look random.
_PREFIXED: list[tuple[str, re.Pattern[str]]] = [
    (what, re.compile(pattern))
    for what, pattern in (
        (
            "an OpenAI/Anthropic-style API key",
            r"(?<![A-Za-z0-9])sk-(?:proj-|ant-(?:api|admin)\d\d-|svcacct-|admin-)?"
            r"(?P<body>[A-Za-z0-9_-]{20,})",
        ),
        ("a Hugging Face token", r"(?<![A-Za-z0-9])hf_(?P<body>[A-Za-z0-9]{20,})"),
        ("a GitHub token", r"(?<![A-Za-z0-9])gh[pousr]_(?P<body>[A-Za-z0-9]{30,})"),
        ("a GitHub fine-grained token", r"github_pat_(?P<body>[A-Za-z0-9_]{30,})"),
        ("a GitLab token", r"glpat-(?P<body>[A-Za-z0-9_-]{20,})"),
        ("an AWS access key id", r"(?<![A-Z0-9])(?:AKIA|ASIA)(?P<body>[A-Z0-9]{16})"),
        ("a Slack token", r"xox[abposr]-(?P<body>[A-Za-z0-9-]{10,})"),
        ("a Google API key", r"AIza(?P<body>[A-Za-z0-9_-]{35})"),
        ("a Stripe key", r"(?<![A-Za-z0-9])[rs]k_(?:live|test)_(?P<body>[A-Za-z0-9]{16,})"),
        ("a PyPI token", r"pypi-(?P<body>AgE[A-Za-z0-9_-]{50,})"),
        ("an npm token", r"(?<![A-Za-z0-9])npm_(?P<body>[A-Za-z0-9]{36})"),
        ("a Replicate token", r"(?<![A-Za-z0-9])r8_(?P<body>[A-Za-z0-9]{30,})"),
        ("a Groq key", r"(?<![A-Za-z0-9])gsk_(?P<body>[A-Za-z0-9]{40,})"),
        (
            "a JSON web token",
            r"eyJ(?P<body>[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
        ),
        ("a private key", r"-----BEGIN (?P<body>[A-Z ]*)PRIVATE KEY-----"),
    )
]
# Bodies of these kinds are fixed-format; the others must look random.
_FIXED_FORMAT = {"an AWS access key id", "a private key", "a JSON web token"}

_URL_USERINFO = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/?#@:]*:(?P<body>[^\s/?#@]+)@")
_URL_SECRET_PARAM = re.compile(
    r"(?i)[?&](?P<name>access_token|api[_-]?key|token|key|password|passwd|secret|auth|sig|"
    r"signature|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|"
    r"x-goog-credential)=(?P<body>[^&\s#]+)"
)
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{20,}")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
MIN_ENTROPY_BITS = 3.7


@dataclass(frozen=True)
class Finding:
    path: KeyPath
    what: str  # "a Hugging Face token", "credentials in a URL", ...
    masked: str  # the start of the secret and its length, never the whole


def entropy_bits(s: str) -> float:
    """Shannon entropy of the character distribution of `s`, in bits per character."""
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _char_class(c: str) -> int:
    return 0 if c.isdigit() else 1 if c.isupper() else 2 if c.islower() else 3


def _mixed(s: str) -> bool:
    """Upper case, lower case and digits all present: a random base62 string of >= 20
    characters has all three with probability > 0.94; `sk-learn-style-names` do not."""
    return {0, 1, 2} <= {_char_class(c) for c in s}


def _looks_random(s: str) -> bool:
    """Mixed, and mixed often: neighbouring characters of a random base62 string differ
    in class with probability 1 - 2 * (26/62)^2 - (10/62)^2 ~= 0.62, while CamelCase
    identifiers (`checkpointBucketForExperiment2024`) change class only between words."""
    classes = [_char_class(c) for c in s]
    changes = sum(a != b for a, b in pairwise(classes))
    return _mixed(s) and changes >= 0.35 * (len(s) - 1)


def _mask(secret: str, shown: str = "") -> str:
    """Only a known, public prefix (hf_, sk-proj-) is shown, and the length."""
    return f"{shown}..., {len(secret)} characters" if shown else f"{len(secret)} characters"


def scan_text(text: str) -> list[tuple[str, str]]:
    """(what, masked) for every secret-looking part of one string."""
    return list(_scan_text(text))


# A compile validates every sweep point and grid cell, each a copy of its spec: the same
# strings are scanned hundreds of times, which was a quarter of a compile's time.
@functools.lru_cache(maxsize=1 << 16)
def _scan_text(text: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for what, pattern in _PREFIXED:
        for m in pattern.finditer(text):
            if what in _FIXED_FORMAT or _mixed(m.group("body")):
                found.append((what, _mask(m.group(0), m.group(0)[: m.start("body") - m.start()])))
    for m in _URL_USERINFO.finditer(text):
        found.append(("a password in a URL (user:password@host)", _mask(m.group("body"))))
    for m in _URL_SECRET_PARAM.finditer(text):
        found.append((f"a secret in a URL query (?{m.group('name')}=...)", _mask(m.group("body"))))
    if not found:
        for m in _ALNUM_RUN.finditer(text):
            run = m.group(0)
            if not _HEX.match(run) and _looks_random(run) and entropy_bits(run) >= MIN_ENTROPY_BITS:
                found.append(("a random token or password", _mask(run)))
    return tuple(found)


def _strings(data: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, str]]:
    """Every string in plain YAML data (keys too), with the key path it sits at."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str):
                yield (*path, key), key
            yield from _strings(value, (*path, key))
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from _strings(item, (*path, i))
    elif isinstance(data, str):
        yield path, data


def find_secrets(data: Any) -> list[Finding]:
    """Secret-looking strings in a spec's plain data, one finding per key path."""
    findings: list[Finding] = []
    seen: set[KeyPath] = set()
    for path, text in _strings(data):
        if path in seen:
            continue
        if len(path) == 3 and path[:2] == ("compute", "envs") and secret_like_name(str(path[2])):
            continue  # the name rule (ComputeSpec) reports this one
        hits = scan_text(text)
        if hits:
            seen.add(path)
            findings.append(Finding(path, *hits[0]))
    return findings


def secret_message(finding: Finding) -> str:
    return (
        f"this value holds what looks like {finding.what} ({finding.masked}). Specs are "
        "committed, and "
        "their values are copied into params.yaml and sky/*.yaml. Fix: remove it; put the "
        "secret in an environment variable and pass it at launch (`sky launch --secret "
        "NAME`, or `export NAME=...` locally); endpoints read their key from the variable "
        "that api_key_env names."
    )


__all__ = [
    "Finding",
    "entropy_bits",
    "find_secrets",
    "scan_text",
    "secret_like_name",
    "secret_message",
]
