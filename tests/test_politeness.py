"""A thanks or please typed after a free-text value is no part of it (a walkthrough: the
address of "…地址改成北京市朝阳区建国路1号 谢谢" was confirmed as "建国路1号 谢谢")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from corral import parse_config
from corral.intent.entities import EntityExtractor
from corral.intent.politeness import without_politeness_head, without_politeness_tail

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
TAILS = ["谢谢", "谢谢你", "谢谢您", "麻烦了", "thanks", "Thank you", "please", "thank you!"]
SEPARATORS = ["", " ", "，", ", ", "。", "! "]
ENDINGS = ["", "!", "！", "。", ".", "~", " "]


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("北京市朝阳区建国路1号 谢谢", "北京市朝阳区建国路1号"),
        ("北京市朝阳区建国路1号谢谢！", "北京市朝阳区建国路1号"),
        ("建国路1号，谢谢啦～", "建国路1号"),
        ("建国路1号 谢谢，麻烦了", "建国路1号"),
        ("5 Main St, thanks!", "5 Main St"),
        ("5 Main St please", "5 Main St"),
        ("5 Main St. Thank you very much.", "5 Main St."),
        ("12 Liberty City", "12 Liberty City"),  # "ty" of a word is no "ty"
        ("Pleasant Ave 3", "Pleasant Ave 3"),
        ("谢谢", ""),  # nothing but politeness: no value
        # a review: codes that end like a tail keep it; an address's capitalised tail not
        ("ABC-THX", "ABC-THX"),
        ("10 Downing Street Thanks", "10 Downing Street"),
        ("5 Main St Please", "5 Main St"),
        ("X9-PLS", "X9-PLS"),
        ("221B Baker Street, London. Thank you!", "221B Baker Street, London."),
    ],
)
def test_a_politeness_tail_is_cut_and_only_it(value: str, kept: str) -> None:
    assert without_politeness_tail(value) == kept


_ADDRESS = st.text(alphabet="北京市朝阳区建国路号楼室0123456789ABC Mainst-", min_size=1).filter(
    lambda s: s.strip() == s and s != ""
)


def _part_of_the_value(value: str, separator: str, tail: str) -> bool:
    """An English tail glued to a letter, digit or dash: "Mainthanks", "X9-PLS"."""
    glued = not separator and (value[-1].isalnum() or value[-1] == "-")
    return glued and tail.isascii() and value[-1].isascii()


@given(
    _ADDRESS,
    st.sampled_from(SEPARATORS),
    st.lists(st.sampled_from(TAILS), min_size=1, max_size=3),
    st.sampled_from(ENDINGS),
)
def test_any_value_followed_by_thanks_is_the_value(
    value: str, separator: str, tails: list[str], ending: str
) -> None:
    assume(not _part_of_the_value(value, separator, tails[0]))
    assert without_politeness_tail(value + separator + " ".join(tails) + ending) == value


@given(_ADDRESS)
def test_a_value_without_a_tail_is_kept_whole(value: str) -> None:
    assert without_politeness_tail(value) == value


def test_a_pattern_capture_loses_its_tail_in_extract_and_mentions() -> None:
    config = parse_config(
        {
            "name": "t",
            "intents": [{"name": "x", "route": "reply", "reply": "done"}],
            "entities": {"note": {"patterns": [r"备注[:：]?\s*(.+)$", r"(?i)note:\s*(.+)$"]}},
        }
    )
    extractor = EntityExtractor(config.entities, "UTC")
    assert extractor.extract("备注：放门口 谢谢", NOW) == {"note": "放门口"}
    assert extractor.extract("note: leave it at the door, thanks!", NOW) == {
        "note": "leave it at the door"
    }
    assert extractor.mentions("备注：放门口 谢谢你", ["note"]) == {"note": ["放门口"]}
    assert extractor.extract("备注：谢谢", NOW) == {}  # no note, not "谢谢"


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        # a walkthrough: asked for the new address, each was proposed and written whole
        ("稍等，上海市徐汇区漕溪北路100号", "上海市徐汇区漕溪北路100号"),
        ("好的，上海市徐汇区漕溪北路100号", "上海市徐汇区漕溪北路100号"),
        ("对，是北京市朝阳区建国路88号", "北京市朝阳区建国路88号"),
        ("wait, it's 12 Baker Street, Shanghai", "12 Baker Street, Shanghai"),
        ("hold on, it is 5 Main St", "5 Main St"),
        ("ok, 12 Baker Street", "12 Baker Street"),
        # a word of the address keeps its place; a line that is only a head stays itself
        ("好望角路5号", "好望角路5号"),
        ("Yes Street 5", "Yes Street 5"),
        ("ok 12 Baker Street", "ok 12 Baker Street"),
        ("是北京市朝阳区建国路88号", "是北京市朝阳区建国路88号"),
        ("稍等", "稍等"),
    ],
)
def test_a_head_before_a_whole_answer_is_cut_and_only_it(value: str, kept: str) -> None:
    assert without_politeness_head(value) == kept
