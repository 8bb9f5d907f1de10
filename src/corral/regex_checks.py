r"""Regexes of a config that a short message could keep running for minutes are refused.

Python's ``re`` backtracks, with no time limit. A repeat around a part that itself
repeats a variable number of times (``(a+)+``, ``(\w+\s?)*``, ``(x{1,9})+``) can split a
run of the same characters between its turns in exponentially many ways: 30 ``a`` and a
``!`` keep ``(a+)+$`` busy for minutes, on the event loop that every run of a server
shares. So can a bounded one of more than three turns (``(a+){1,10}``). Such a pattern
is ``CONFIG_INVALID`` at load, where a person can rewrite it.

Not every repeat in a repeat splits. An inner repeat is *fenced*, and accepted, when
something the rest of its turn must match starts with a character it cannot take
(``(\d+,)*``: a comma; ``(?:\b\w+\b\s*)+``: the end of a word), or, where the rest may
match nothing, when the next turn does (``(?:yet\s+|been\s+)*``: a letter). Inner
repeats written atomic (``(?>a+)``) or possessive (``a++``) give nothing back, and are
accepted too. Characters are compared on a sample (the pattern's own literals and range
ends, a few of each common class), in both cases where the pattern ignores case (rules
and entities do: ``[A-Z]`` then fences no ``[a-z]``).

Repeats side by side explode too, more slowly: three long repeats in a row that can take
the same character, with something after them that can fail (``^\s*[\s,]*\s*x``), try
every split of a run of that character between them: n³ steps for a run of n, minutes for
4 000 spaces (a message the default ``limits.max_message_chars`` lets in). A search that
is not anchored at the start tries every start too, which counts as one more repeat
(``[\d,]*\d+\s*元``). Rows on runs of different characters multiply: ``(\d+)\s*元?\s*退款``
on digits then spaces is each start on the digits times two splits of the spaces; so
does each turn of a short repeat (``(?:\w+-?\w*\s+){0,4}x``: four words, each split two
ways, 205 characters for 54 s), and each way of a branch is read on from what came
before it. Such a pattern is refused too (``repeats_in_a_row``); two in a row (n²: a
fraction of a second for 4 000 characters) are everywhere, and accepted.

What is not caught: alternatives that overlap (``(a|a)+``), rarer, and runs of a string
longer than one character (``.*退款.*多久`` on 退款 over and over), and which no cheap
check tells from the ordinary ``(cat|dog)+``. What is refused though safe: a fence of
more than one character whose first one the inner repeat can take (``(?:0x[0-9a-f]+\s*)+``:
``0`` is a hex digit); write the inner repeat possessive (``[0-9a-f]++``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

from corral.errors import ConfigInvalidError

# the parser, its node names and the compiler ``re`` itself uses (no stubs: typed Any)
_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")
_compiler: Any = importlib.import_module("re._compiler")

NESTED_HINT = (
    "make each turn of the outer repeat end (or start) with a character the inner repeat "
    "cannot match, as in (\\d+,)*, or write the inner repeat atomic, (?>a+), or "
    "possessive, a++"
)
ROW_HINT = (
    "make the repeats before the last one possessive, as in \\s*+, merge them into one, or "
    "anchor the pattern with ^ where it is searched from its start"
)
_ROW = 3
"""Long repeats in a row (a search's free start counted as one) that make a pattern
explode: n to that power steps for a run of n characters they all take."""
_LONG = 64
r"""A repeat that may take this many characters more than its least is long (``*``, ``+``,
``{0,100}``); a shorter one multiplies the steps by a constant at most (which this check
does not weigh: ``\s{0,30}`` four times in a row took 1.8 s on 800 spaces, and 16 as the
bound refused linear rules such as ``.{0,40}(改|换).{0,40}地址``)."""
_MANY = 3
"""An outer repeat of more than this many turns (or unbounded) is one that can explode:
``(a+){1,10}`` splits 37 ``a`` in tens of millions of ways."""
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT)
_SAMPLE = "aZz09 \t\n_-.,!?:;'\"/一中。，é"
"""Characters every check tries, besides the pattern's own."""

_GROUP_REPEATED = re.compile(r"\)[*+{]")
"""A group with a repeat after it: where a repeat in a repeat must start (no parse)."""
_INLINE_VERBOSE = re.compile(r"\(\?[a-zA-Z]*x")
"""``(?x)``: white space and comments may stand between a group and its repeat."""

Item = tuple[Any, Any]


def refuse_explosive(pattern: str, what: str, flags: int = 0) -> None:
    """``CONFIG_INVALID`` for a pattern of ``what`` (an intent's rule...) that can explode.

    ``flags``: those it is compiled with (``re.IGNORECASE``: ``[A-Z]`` fences nothing).
    """
    problem = explosive(pattern, flags)
    if problem is not None:
        why, hint = problem
        raise ConfigInvalidError(f"{what}: pattern {pattern[:200]!r} {why}", hint=hint)


def explosive(pattern: str, flags: int = 0) -> tuple[str, str] | None:
    """Why ``pattern`` can keep a search running for minutes, and how to write it.

    ``None``: it cannot. A pattern that does not parse is not this check's to report.
    """
    if nested_repeat(pattern, flags):
        return (
            "repeats a part that itself repeats, with nothing between the turns: a message "
            "of 30 characters could keep it running for minutes",
            NESTED_HINT,
        )
    if repeats_in_a_row(pattern, flags):
        return (
            f"has {_ROW} long repeats in a row that can take the same character (a search "
            "not anchored with ^ counts as one): a message of a few thousand such "
            "characters could keep it running for minutes",
            ROW_HINT,
        )
    return None


def repeats_in_a_row(pattern: str, flags: int = 0) -> bool:
    """Whether ``pattern`` has ``_ROW`` long repeats in a row that take one character.

    They must all be able to take it, with something after them that can fail (module doc).
    """
    try:
        parsed = _parser.parse(pattern, flags)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    items = list(parsed.data)
    check = _Check(parsed)
    begins = (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING)
    multiline = parsed.state.flags & re.MULTILINE
    anchored = bool(items) and items[0][0] is _c.AT and items[0][1] in begins
    if anchored and items[0][1] is _c.AT_BEGINNING and multiline:
        anchored = False  # ^ starts every line: a text of newlines has a start at each
    free_start: Rows = {} if anchored else {frozenset(check.sample): (1, 0)}
    return _Row(check, free_start).explodes(items)


def nested_repeat(pattern: str, flags: int = 0) -> bool:
    """Whether ``pattern`` repeats, many times, an unfenced part that repeats (module doc).

    ``flags``: those it is compiled with. A pattern that does not parse is not this
    check's to report (``re.compile`` says why).
    """
    verbose = flags & re.VERBOSE or _INLINE_VERBOSE.search(pattern) is not None
    if not verbose and _GROUP_REPEATED.search(pattern) is None:
        return False  # only a group can hold a repeat, and none is repeated
    try:
        parsed = _parser.parse(pattern, flags)
    except (re.error, RecursionError, OverflowError, ValueError):  # (?a)(?u): a ValueError
        return False
    return _Check(parsed).explodes(list(parsed.data))


class _Check:
    def __init__(self, parsed: Any) -> None:
        self.parsed = parsed
        self.ignore_case = bool(parsed.state.flags & re.IGNORECASE)
        self._sample: str | None = None

    @property
    def sample(self) -> str:
        """The characters compared: made only for a pattern with a repeat in a repeat."""
        if self._sample is None:
            found = _sample(list(self.parsed.data))
            if self.ignore_case:
                found += found.swapcase()
            self._sample = "".join(sorted(set(found)))
        return self._sample

    def literal(self, value: int) -> set[str]:
        """What a literal matches: itself, and its other case where case is ignored."""
        char = chr(value)
        return {char, char.lower(), char.upper()} if self.ignore_case else {char}

    def explodes(self, items: list[Item], turns: int = 1) -> bool:
        """Whether a repeat in ``items`` holds an unfenced variable repeat.

        ``turns``: how many times the repeats around ``items`` may run them, multiplied
        (``{1,3}`` inside ``{1,3}`` is nine turns).
        """
        for op, value in items:
            if op in _REPEATS:
                _, high, body = value
                body = list(body)
                many = min(high * turns, _c.MAXREPEAT)
                if many > _MANY and self._splits(body, body, ()):
                    return True
                if self.explodes(body, many):
                    return True
            elif op in (_c.POSSESSIVE_REPEAT, _c.ATOMIC_GROUP):
                # gives nothing back to what is around it; its own inside may still explode
                if any(self.explodes(inner) for inner in _children(op, value)):
                    return True
            elif any(self.explodes(inner, turns) for inner in _children(op, value)):
                return True
        return False

    def _splits(self, items: list[Item], turn: list[Item], follow: tuple[list[Item], ...]) -> bool:
        """Whether ``items``, in one turn (``turn``) of a repeat, holds an unfenced repeat."""
        for index, (op, value) in enumerate(items):
            after = (items[index + 1 :], *follow)
            if op in _REPEATS:
                low, high, body = value
                if high == low:  # a fixed count: a part of the turn, as it is
                    if self._splits(list(body), turn, after):
                        return True
                elif not self._fenced(list(body), after, turn):  # a?, a*, a{1,9}
                    return True
                continue  # what a fenced repeat holds is checked as a repeat of its own
            if op in (_c.POSSESSIVE_REPEAT, _c.ATOMIC_GROUP):
                continue  # gives nothing back
            for inner in _children(op, value):
                if self._splits(inner, turn, after):
                    return True
        return False

    def _fenced(self, body: list[Item], after: tuple[list[Item], ...], turn: list[Item]) -> bool:
        """Whether the inner repeat cannot run on into the next turn.

        It cannot when something the rest of its turn must match starts with a character
        it cannot take (whatever lies between: a part in between that overlaps is checked
        as an inner repeat of its own), or, where all the rest may match nothing, when the
        next turn does.
        """
        taken = self._chars(body)
        words = all(_word(char) for char in taken)
        for sequence in after:
            for item in sequence:
                first, nullable = self._first([item], words)
                if not nullable and not first & taken:
                    return True
        first, nullable = self._first(turn, words)
        return not nullable and not first & taken

    def _first(self, items: list[Item], words: bool = False) -> tuple[set[str], bool]:
        r"""The sample characters ``items`` may start with, and whether they may match nothing.

        ``words``: they follow word characters, so ``\b`` there means the next one is
        not a word character. ``$`` means none follows (a line's end: a newline).
        """
        found: set[str] = set()
        for op, value in items:
            if op is _c.AT:
                if value in (_c.AT_END, _c.AT_END_STRING):
                    multiline = self.parsed.state.flags & re.MULTILINE and value is _c.AT_END
                    return found | ({"\n"} if multiline else set()), False
                if words and value is _c.AT_BOUNDARY:
                    return found | {c for c in self.sample if not _word(c)}, False
                continue  # takes no character, and says nothing of the next
            if op is _c.ASSERT and value[0] == 1:  # a lookahead: what the next one must be
                first, nullable = self._first(list(value[1]), words)
                if not nullable:
                    return found | first, False
                continue
            if op in (_c.ASSERT, _c.ASSERT_NOT):
                continue
            if op in (*_REPEATS, _c.POSSESSIVE_REPEAT):
                first, nullable = self._first(list(value[2]), words)
                found |= first
                if value[0] > 0 and not nullable:
                    return found, False
                continue
            if op in (_c.SUBPATTERN, _c.ATOMIC_GROUP, _c.BRANCH, _c.GROUPREF_EXISTS):
                parts = list(_children(op, value))
                results = [self._first(part, words) for part in parts]
                found |= set().union(*(first for first, _ in results))
                no_else = op is _c.GROUPREF_EXISTS and value[2] is None  # may match nothing
                if not no_else and not any(nullable for _, nullable in results):
                    return found, False
                continue
            if op is _c.GROUPREF:  # what a group took: anything, or nothing
                found |= set(self.sample)
                continue
            if op is _c.LITERAL:
                return found | self.literal(value), False
            found |= self._one(op, value)  # a class, a category, any: one character
            return found, False
        return found, True

    def _run_chars(self, items: list[Item]) -> set[str]:
        r"""The characters of which ``items`` can take a run, again and again.

        Those every part it must match can take: ``\.[a-z]+`` takes no run of one
        character, ``[a-z]+`` a run of any letter.
        """
        found: set[str] | None = None
        for op, value in items:
            if op is _c.SUBPATTERN:
                chars = self._run_chars(list(value[3]))
            elif op is _c.AT or op in (_c.ASSERT, _c.ASSERT_NOT) or self._first([(op, value)])[1]:
                continue  # takes no character, or may take none
            else:
                chars = self._chars([(op, value)])
            found = chars if found is None else found & chars
        return self._chars(items) if found is None else found

    def _chars(self, items: list[Item]) -> set[str]:
        """Every sample character ``items`` may take, anywhere."""
        found: set[str] = set()
        for op, value in items:
            if op is _c.LITERAL:
                found |= self.literal(value)
            elif op in (_c.IN, _c.NOT_LITERAL, _c.ANY, _c.CATEGORY):
                found |= self._one(op, value)
            elif op is _c.GROUPREF:
                found |= set(self.sample)  # may repeat anything
            else:
                for inner in _children(op, value):
                    found |= self._chars(inner)
        return found

    def _one(self, op: Any, value: Any) -> set[str]:
        """The sample characters one single-character item matches."""
        single = _parser.SubPattern(self.parsed.state, [(op, value)])
        matcher = _compiler.compile(single, 0)
        return {ch for ch in self.sample if matcher.match(ch)}


Rows = dict[frozenset[str], tuple[int, int]]
"""For each row: the characters it can take, and (its repeats, the degree carried to it)."""
_UNROLLED = 4
"""A short repeat of at most this many turns is read as its body that many times."""


class _Row:
    r"""Walks a sequence and keeps the rows of long repeats that can take one character.

    ``rows``: for each row, the characters all its repeats (and the items between them)
    can take, how many repeats it has, and the degree carried to it from rows before it;
    a search's free start is a row of one that takes anything. The steps a failing match
    takes grow as the length of a run to the power of a row's repeats: each but the last
    splits the run, and the last gives back. A row followed by a repeat or a character
    that it cannot take ends where its run does: its last repeat is then held to that
    end, and it carries one less to the row after it (``\d+\s*\s*x`` on digits then
    spaces: starts, times two splits of the spaces).

    A long repeat grows every row it shares a character with, starts a row of its own,
    and ends the others; one that may take nothing lets rows pass it too. An item that
    must take a character keeps the rows that can take it and ends the others; one that
    may match nothing is passed. A branch is read from the rows before it, each way; a
    short repeat (at most ``_UNROLLED`` turns) as its body that many times. A possessive
    or atomic part gives nothing back: it ends the rows it takes from, after scanning the
    run once for every split before it (``closed`` when that is ``_ROW`` or more). Once a
    row's degree is ``_ROW``, anything after it that can fail makes the pattern explode.
    """

    def __init__(self, check: _Check, rows: Rows) -> None:
        self.check = check
        self.rows = rows
        self.closed = False
        self.anything = frozenset(check.sample)
        self.optional = False
        """In a turn a repeat may go without: where it fails, the repeat ends, and what
        follows the repeat is what can fail."""

    @property
    def armed(self) -> bool:
        return self.closed or any(sum(row) >= _ROW for row in self.rows.values())

    def explodes(self, items: list[Item]) -> bool:
        for op, value in items:
            if op is _c.SUBPATTERN:  # a group: its items are in the row's sequence
                if self.explodes(list(value[3])):
                    return True
            elif op is _c.AT or op in (_c.ASSERT, _c.ASSERT_NOT):
                if _starts(op, value) and not self._multiline:
                    self.rows = {}  # one place to start, whatever came before
                elif self.armed and not self.optional and not _starts(op, value):
                    return True  # an end, \b, a lookaround
                else:
                    self._bounds(op, value)
            elif op in (_c.BRANCH, _c.GROUPREF_EXISTS):
                if self._either(op, value):
                    return True
            elif op in _REPEATS and not _long(value):
                if self._turns(value):
                    return True
            elif self._inside(op, value) or self._takes(op, value):
                return True
        return False

    @property
    def _multiline(self) -> bool:
        return bool(self.check.parsed.state.flags & re.MULTILINE)

    def _bounds(self, op: Any, value: Any) -> None:
        r"""Narrow the rows at an assertion that may not fail yet (no row is armed).

        A lookaround of one character says what the run's character is, or is not:
        ``(?<!\d)\d+`` starts a number once in a run of digits, not at each digit. Not
        ``\b``: a run of two characters ("a a a …") has a boundary at every one of them.
        """
        if op is _c.AT:
            return
        body = list(value[1])
        if len(body) != 1 or body[0][0] not in (_c.LITERAL, _c.IN, _c.ANY, _c.CATEGORY):
            return
        chars = frozenset(self.check._chars(body))
        rows = self.rows.items()
        if op is _c.ASSERT:
            self.rows = _merged(*({common & chars: row} for common, row in rows))
        else:
            self.rows = _merged(*({common - chars: row} for common, row in rows))

    def _inside(self, op: Any, value: Any) -> bool:
        """Whether a row within the item (a repeat's body) explodes there."""
        return any(_Row(self.check, {}).explodes(inner) for inner in _children(op, value))

    def _either(self, op: Any, value: Any) -> bool:
        """Read each way of a branch from the rows before it; keep the rows after each."""
        ways = []
        for inner in _children(op, value):
            way = _Row(self.check, dict(self.rows))
            way.optional = self.optional
            if way.explodes(inner):
                return True
            ways.append(way)
        if op is _c.GROUPREF_EXISTS and value[2] is None:  # no else: it may match nothing
            ways.append(_Row(self.check, dict(self.rows)))
        self.closed = self.closed or any(way.closed for way in ways)
        self.rows = _merged(*(way.rows for way in ways))
        return False

    def _turns(self, value: Any) -> bool:
        """Read a short repeat as its body, once for each turn it may take."""
        low, high, body = value
        turns = min(high, _UNROLLED)
        after: list[Rows] = [dict(self.rows)] if low == 0 else []
        way = _Row(self.check, dict(self.rows))
        for turn in range(1, turns + 1):
            way.optional = self.optional or turn > low
            if way.explodes(list(body)):
                return True
            if turn >= min(low, turns):
                after.append(dict(way.rows))
        self.closed = self.closed or way.closed
        self.rows = _merged(*after)
        return False

    def _takes(self, op: Any, value: Any) -> bool:
        """Take one item; ``True``: the row before it explodes at it."""
        first, nullable = self.check._first([(op, value)])
        if self.armed and not nullable and not self.optional:
            return True  # a character after the run that it cannot take
        rows = self.rows
        carries = [carried + max(count - 1, 0) for count, carried in rows.values()]
        ended = [{self.anything: (0, carry)} for carry in carries]  # at the run's end
        chars = frozenset(self.check._run_chars(list(value[2]))) if op in _REPEATS else None
        if chars:  # a long repeat, of a body that can take a run
            grown = [
                {common & chars: (count + 1, carried)} for common, (count, carried) in rows.items()
            ]
            started = [{chars: (1, carry)} for carry in carries]
            self.rows = _merged(dict(rows) if nullable else {}, *grown, *started, {chars: (1, 0)})
        elif op in (_c.POSSESSIVE_REPEAT, _c.ATOMIC_GROUP):
            taken = frozenset(self.check._chars(next(_children(op, value))))
            if any(sum(row) + 1 >= _ROW for common, row in rows.items() if common & taken):
                self.closed = True
            kept = [{common - taken: row} for common, row in rows.items()] if nullable else []
            self.rows = _merged(*kept, *ended)
        elif not nullable:
            taking = [{common & first: row} for common, row in rows.items()]
            self.rows = _merged(*taking, *ended)
        elif op in _REPEATS:  # may take a few characters after the run, or none
            self.rows = _merged(dict(rows), *ended)
        return False


def _long(value: Any) -> bool:
    """Whether a repeat is long: unbounded, or ``_LONG`` or more above its least."""
    low, high, _ = value
    return bool(high == _c.MAXREPEAT or high - low >= _LONG)


def _merged(*parts: Rows) -> Rows:
    """The rows of ``parts`` that can still take a character, the highest degree for each."""
    rows: Rows = {}
    for part in parts:
        for common, row in part.items():
            held = rows.get(common)
            if common and (held is None or (sum(row), row[0]) > (sum(held), held[0])):
                rows[common] = row
    return rows


def _starts(op: Any, value: Any) -> bool:
    """Whether an anchor is the text's or a line's start (which cannot follow a repeat)."""
    return op is _c.AT and value in (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING)


def _word(char: str) -> bool:
    r"""Whether ``re`` reads ``char`` as a word character (``\w``)."""
    return char.isalnum() or char == "_"


def _children(op: Any, value: Any) -> Iterator[list[Item]]:
    """The sequences an item holds (a group's, each branch's, a repeat's body)."""
    if op in (*_REPEATS, _c.POSSESSIVE_REPEAT):
        yield list(value[2])
    elif op is _c.SUBPATTERN:
        yield list(value[3])
    elif op is _c.ATOMIC_GROUP:
        yield list(value)
    elif op is _c.BRANCH:
        yield from (list(branch) for branch in value[1])
    elif op in (_c.ASSERT, _c.ASSERT_NOT):
        yield list(value[1])
    elif op is _c.GROUPREF_EXISTS:
        yield from (list(part) for part in value[1:] if part is not None)


def _sample(items: list[Item]) -> str:
    """``_SAMPLE`` and the pattern's own literal characters and range ends."""
    found = set(_SAMPLE)
    for op, value in items:
        if op is _c.LITERAL:
            found.add(chr(value))
        elif op is _c.IN:
            for kind, member in value:
                if kind is _c.LITERAL:
                    found.add(chr(member))
                elif kind is _c.RANGE:
                    found |= {chr(member[0]), chr(member[1])}
        else:
            for inner in _children(op, value):
                found |= set(_sample(inner))
    return "".join(sorted(found))
