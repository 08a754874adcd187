"""The generator's own vocabularies: pseudo-words, codes, numbers and a few label nouns.

Most words are drawn fresh for every page (pseudo-words from syllables), so a skill
cannot be learned by memorising names: the model has to copy or match what it reads.
The fixed lists are short and our own (overlap.py reports which of their words also
occur in the suite's instructions).
"""

from __future__ import annotations

import random

_ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "fl",
    "gr",
    "kl",
    "pl",
    "sk",
    "st",
    "tr",
    "sh",
    "ch",
    "th",
    "j",
    "y",
    "w",
]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ai", "ou", "ea", "io"]
_CODAS = ("", "", "", "n", "r", "l", "s", "k", "m", "x", "th", "nd", "st")
_CODE_CHARS = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"

# Field labels a form might carry (besides capitalised pseudo-words).
LABEL_NOUNS = (
    "Nickname",
    "Passcode",
    "Alias",
    "Motto",
    "Handle",
    "Token",
    "Keyword",
    "Codeword",
    "Memo",
    "Tagline",
    "Serial",
    "Voucher",
    "Hometown",
    "Petname",
    "Signature",
    "Secret phrase",
    "Member code",
    "Favourite fruit",
    "Street",
    "Postcode",
)
# Names of the button that ends a form (besides capitalised pseudo-words).
FINISH_WORDS = (
    "Send",
    "Done",
    "Save",
    "Confirm",
    "Go",
    "Apply",
    "Finish",
    "Continue",
    "Proceed",
    "Next",
    "Store",
    "Register",
)


def pseudo_word(rng: random.Random, syllables: tuple[int, int] = (1, 3)) -> str:
    """A pronounceable made-up word, e.g. `plimor`, `traskevo`."""
    n = rng.randint(*syllables)
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n))


def name(rng: random.Random) -> str:
    """A capitalised pseudo-word (a made-up person, place or product)."""
    return pseudo_word(rng, (2, 3)).capitalize()


def code(rng: random.Random, lo: int = 1, hi: int = 8) -> str:
    """A random mixed-case code such as `q7Rt` (copying it needs every character)."""
    return "".join(rng.choice(_CODE_CHARS) for _ in range(rng.randint(lo, hi)))


def number(rng: random.Random) -> str:
    return str(rng.randint(0, 10 ** rng.randint(1, 5)))


def value(rng: random.Random) -> str:
    """A value to copy: a word, a name, a code, a number or a two-word phrase."""
    kind = rng.random()
    if kind < 0.3:
        return code(rng)
    if kind < 0.5:
        return pseudo_word(rng, (1, 3))
    if kind < 0.7:
        return name(rng)
    if kind < 0.85:
        return number(rng)
    return f"{pseudo_word(rng, (1, 2))} {pseudo_word(rng, (1, 2))}"


def label(rng: random.Random) -> str:
    """A field label: one of our label nouns or a capitalised pseudo-word."""
    return rng.choice(LABEL_NOUNS) if rng.random() < 0.4 else name(rng)


def finish_word(rng: random.Random) -> str:
    return rng.choice(FINISH_WORDS) if rng.random() < 0.6 else name(rng)


def distinct(rng: random.Random, make: object, n: int) -> list[str]:
    """n different strings from the generator `make(rng)` (case-insensitively different)."""
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        w = make(rng)  # type: ignore[operator]
        if w.lower() not in seen:
            seen.add(w.lower())
            out.append(w)
    return out


def sentence(rng: random.Random, lo: int = 3, hi: int = 10) -> str:
    """Filler text: a capitalised run of pseudo-words ending in a full stop."""
    words = [pseudo_word(rng, (1, 3)) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def fixed_words() -> list[str]:
    """Every word of the fixed lists (what overlap.py compares with the suite's words)."""
    return sorted({w.lower() for t in (*LABEL_NOUNS, *FINISH_WORDS) for w in t.split()})
