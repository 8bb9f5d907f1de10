"""Text as matching reads it: characters whose plain form is one ASCII character, folded.

Chinese input methods type full-width digits and letters (ＨＤ２０２４０５０１), and text
pasted from documents carries odd spaces and mathematical digits. One character folds to
one, so an offset in the folded text is an offset in the original.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain

_FOLD_BLOCKS = (
    (0x80, 0x100),  # no-break space, superscript digits
    (0x2BC, 0x2BD),  # modifier apostrophe: no NFKC form, but an apostrophe for words
    (0x2000, 0x2500),  # spaces, punctuation, super/subscripts, enclosed digits
    (0x3000, 0x3001),  # ideographic space
    (0xFE50, 0xFFEF),  # small and full-width forms
    (0x1D400, 0x1D800),  # mathematical letters and digits
)
"""Where the characters that fold to ASCII are; text with none of them is not folded."""


def _fold_table() -> dict[int, str]:
    """Characters whose NFKC form is one ASCII character, mapped to it.

    Full-width digits and letters, ``：``, ``＠``, odd spaces, mathematical digits: one
    character for one, so offsets in the folded text are offsets in the original.
    """
    table = {}
    for code in chain(*(range(start, end) for start, end in _FOLD_BLOCKS)):
        folded = unicodedata.normalize("NFKC", chr(code))
        if len(folded) == 1 and folded.isascii() and folded != chr(code):
            table[code] = folded
    return table


_FOLD = _fold_table()
_MAY_FOLD = re.compile(
    "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b - 1))}" for a, b in _FOLD_BLOCKS) + "]"
)


def fold_to_ascii(text: str) -> str:
    """``text`` with every character whose NFKC form is one ASCII character folded to it.

    Punctuation too: redaction reads ``：`` as ``:``.
    """
    return text if not _MAY_FOLD.search(text) else text.translate(_FOLD)


_APOSTROPHES = {0x2018: "'", 0x2019: "'", 0x02BC: "'"}
"""Typographic apostrophes (‘ ’ ʼ), as phones and word processors type them in "don’t" and
"where’s". NFKC leaves them be, so without this a rule written with ``'`` missed them (a
"don’t want a refund" was no negation)."""

_ALNUM_FOLD = {code: folded for code, folded in _FOLD.items() if folded.isalnum()}

_WORD_FOLD = {
    **_ALNUM_FOLD,
    **{code: folded for code, folded in _FOLD.items() if folded == "'"},  # full-width '
    **_APOSTROPHES,
}


def fold_letters_and_digits(text: str) -> str:
    """``text`` with full-width (and other) letters and digits as ASCII ones.

    Nothing else changes: a pattern written with Chinese punctuation (``，``) still sees it,
    and an entity's value keeps its quotes ("12 O’Brien Street" is an address as typed).
    """
    return text if not _MAY_FOLD.search(text) else text.translate(_ALNUM_FOLD)


def fold_word_characters(text: str) -> str:
    """``text`` as intent rules read it: letters, digits and apostrophes as ASCII ones."""
    return text if not _MAY_FOLD.search(text) else text.translate(_WORD_FOLD)
