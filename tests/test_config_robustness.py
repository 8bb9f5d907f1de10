"""A broken or hostile agent folder fails at load with CONFIG_INVALID, quickly and clearly.

agent.yaml and tools.py come from the developer, but a typo, a pasted YAML bomb or a
rule that formats a huge string must still end in ``CONFIG_INVALID`` naming the file and
line, not in a traceback, minutes of parsing or gigabytes of memory (issue 7, defect 10).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral import load_agent, load_config, parse_config
from corral.errors import ConfigInvalidError, ExpressionInvalidError
from corral.safe_yaml import load_yaml_text
from corral.verify import compile_expression
from tests.conftest import ROOT
from tests.helpers import build_agent, corral_cli

TOOLS = '''\
from pydantic import BaseModel

from corral import tool


class Found(BaseModel):
    ok: bool


@tool
def lookup(items: list[str] | None = None, more: list[str] | None = None) -> Found:
    """Look something up."""
    return Found(ok=True)
'''
TOOLS_LINES = TOOLS.count("\n")

AGENT_YAML = """\
name: robust
intents:
  - name: look
    rules: [{keywords: [go], confidence: 0.95}]
    plan: p
    reply: done
plans:
  p:
    steps:
      - id: s1
        tool: lookup
        args: {items: [a]}
templates:
  done: {zh: 好, en: done}
"""


def agent_dir(tmp_path: Path, yaml_text: str = AGENT_YAML, tools: str = TOOLS) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    (folder / "agent.yaml").write_text(yaml_text, encoding="utf-8")
    (folder / "tools.py").write_text(tools, encoding="utf-8")
    return folder


def fails_at_load(tmp_path: Path, folder: Path) -> str:
    """Run the agent through the CLI: exit 2 with CONFIG_INVALID, no traceback."""
    done = corral_cli(tmp_path / "home", "run", str(folder), "go", ok=False)
    err = " ".join(done.stderr.split())  # the console may wrap long lines
    assert done.returncode == 2, done.stderr
    assert "CONFIG_INVALID" in err and "Traceback" not in done.stderr, done.stderr
    return err


def test_the_fixture_agent_runs(tmp_path: Path) -> None:
    """The agent the other tests break is valid: their failures come from the break."""
    done = corral_cli(tmp_path / "home", "run", str(agent_dir(tmp_path)), "go", "--json")
    assert '"status":"succeeded"' in done.stdout.replace(" ", "")


# ----------------------------------------------------------------------------- YAML


def bomb(levels: int = 9) -> str:
    """Billion laughs in a step argument: 9 ** 9 strings from under 1 KB of YAML."""
    rows = ['            - &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    rows += [f"            - &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    args = "\n".join(["        args:", "          items: [x]", "          more:", *rows])
    return AGENT_YAML.replace("        args: {items: [a]}", args)


def _limit_memory() -> None:  # a regression must fail, not eat the machine
    two_gib = 2 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (two_gib, two_gib))


def test_alias_bomb_is_refused_fast_through_the_cli(tmp_path: Path) -> None:
    text = bomb()
    assert len(text.encode()) < 2000
    folder = agent_dir(tmp_path, text)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "corral", "run", str(folder), "go", "--home", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**os.environ, "COLUMNS": "200"},
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("loading a 1 KB alias bomb did not finish within 60 s")
    err = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stderr[-2000:]
    assert "CONFIG_INVALID" in err and "alias" in err, err
    assert "agent.yaml:" in err


def test_alias_bomb_names_the_line(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path, bomb(levels=8))
    with pytest.raises(ConfigInvalidError, match=r"agent\.yaml:\d+: .*aliases expanded"):
        load_config(folder / "agent.yaml")


def test_ordinary_anchors_and_merges_still_load(tmp_path: Path) -> None:
    text = AGENT_YAML.replace(
        "  done: {zh: 好, en: done}",
        "  done: &done {zh: 好, en: done}\n  again: *done\n  more: {<<: *done, en: more}",
    )
    config = load_config(agent_dir(tmp_path, text) / "agent.yaml")
    assert config.templates["again"] == config.templates["done"]
    assert config.templates["more"].zh == "好" and config.templates["more"].en == "more"


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    """The defect: YAML keeps the last of two equal keys, silently. A second
    ``business_rules:`` block appended to the orders example dropped the first's
    ``cancel_only_before_shipping``, and a shipped order was offered for cancellation."""
    from corral.cli.examples import LEFT_BEHIND
    from tests.conftest import ORDERS

    folder = tmp_path / "orders"
    shutil.copytree(ORDERS, folder, ignore=LEFT_BEHIND)
    lines = (folder / "agent.yaml").read_text(encoding="utf-8").splitlines()
    first = 1 + next(i for i, line in enumerate(lines) if line.startswith("business_rules:"))
    appended = (
        "\nbusiness_rules:\n  - name: refund_only_after_shipping\n"
        '    before_tool: request_refund\n    require: facts.order_status == "shipped"\n'
        "    refusal: refund_not_possible\n"
    )
    with (folder / "agent.yaml").open("a", encoding="utf-8") as handle:
        handle.write(appended)
    err = fails_at_load(tmp_path, folder)
    assert f"duplicate key 'business_rules' (first on line {first})" in err
    assert f"agent.yaml:{len(lines) + 2}:" in err  # the second one's line


@pytest.mark.parametrize(
    "text",
    [
        "limits: {max_plan_steps: 10, max_plan_steps: 11}\n",
        "a: 1\nb:\n  c: 1\n  c: 2\n",
        # spelt apart, one key once read (found by review): yes/true, 1/1.0/0x1, ~/null
        "yes: 1\ntrue: 2\n",
        "1: a\n1.0: b\n",
        "0x1: a\n1: b\n",
        "~: a\nnull: b\n",
        "1: a\ntrue: b\n",
    ],
)
def test_a_duplicate_key_at_any_depth_or_in_a_flow_mapping_is_refused(text: str) -> None:
    with pytest.raises(ConfigInvalidError, match="duplicate key"):
        load_yaml_text(text, "x.yaml")


def test_a_merge_may_still_be_overridden_and_equal_keys_may_sit_in_sibling_mappings() -> None:
    assert load_yaml_text("1: a\n'1': b\n", "x.yaml") == {1: "a", "1": "b"}  # two keys
    text = "base: &b {a: 1, c: 3}\nmore:\n  <<: *b\n  a: 2\nlist: [{a: 1}, {a: 2}]\n"
    assert load_yaml_text(text, "x.yaml") == {
        "base": {"a": 1, "c": 3},
        "more": {"a": 2, "c": 3},
        "list": [{"a": 1}, {"a": 2}],
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("name: &n [*n]\n", "refers to itself"),
        ("name: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        ("name: !!int nope\n", "nope"),
    ],
)
def test_recursive_deep_or_mistyped_yaml_is_config_invalid(
    tmp_path: Path, text: str, problem: str
) -> None:
    with pytest.raises(ConfigInvalidError, match=problem):
        load_config(agent_dir(tmp_path, text) / "agent.yaml")


def test_agent_yaml_size_is_capped(tmp_path: Path) -> None:
    padding = "x" * (1024 * 1024)  # with the rest, just over the documented 1 MiB
    folder = agent_dir(tmp_path, AGENT_YAML + f"description: {padding}\n")
    with pytest.raises(ConfigInvalidError, match="larger than"):
        load_config(folder / "agent.yaml")


def test_non_utf8_agent_yaml_is_config_invalid_with_its_line(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path)
    text = AGENT_YAML.replace("name: robust", "name: robust\ndescription: café")
    (folder / "agent.yaml").write_bytes(text.encode("utf-8").replace("é".encode(), b"\xe9"))
    with pytest.raises(ConfigInvalidError, match=r"agent\.yaml:2: not UTF-8"):
        load_config(folder / "agent.yaml")
    assert "agent.yaml:2: not UTF-8" in fails_at_load(tmp_path, folder)


# ----------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("section", "text"),
    [
        ("budget", "budget: {max_wall_clock_s: 1e999}"),
        ("budget", "budget: {max_cost: .inf}"),
        ("limits", "limits: {intent_confidence: .nan}"),
        ("model", "model: {temperatures: {reply: .nan}}"),
        ("model", "model: {prices: {m: {prompt: -.inf}}}"),
    ],
)
def test_non_finite_numbers_are_refused(tmp_path: Path, section: str, text: str) -> None:
    folder = agent_dir(tmp_path, AGENT_YAML + text + "\n")
    with pytest.raises(ConfigInvalidError, match="finite"):
        load_config(folder / "agent.yaml")


@pytest.mark.parametrize("grace", ["0", "-1", "7200"])
def test_a_cancel_grace_out_of_bounds_is_refused(tmp_path: Path, grace: str) -> None:
    folder = agent_dir(tmp_path, AGENT_YAML + f"limits: {{cancel_grace_s: {grace}}}\n")
    with pytest.raises(ConfigInvalidError, match="cancel_grace_s"):
        load_config(folder / "agent.yaml")


def test_non_finite_step_argument_is_refused_with_its_line(tmp_path: Path) -> None:
    text = AGENT_YAML.replace("args: {items: [a]}", "args: {items: [a], more: [.inf]}")
    with pytest.raises(ConfigInvalidError, match=r"agent\.yaml:12: .*not a finite number"):
        load_config(agent_dir(tmp_path, text) / "agent.yaml")


def test_non_finite_values_passed_in_code_are_refused() -> None:
    data: dict[str, Any] = {
        "name": "x",
        "intents": [{"name": "i", "route": "reply", "reply": "r"}],
        "plans": {"p": {"steps": [{"id": "s", "tool": "t", "args": {"n": float("nan")}}]}},
    }
    with pytest.raises(ConfigInvalidError, match=r"plans\.p\.steps\.0\.args\.n"):
        parse_config(data)


# ------------------------------------------------------------------- expressions


@pytest.mark.parametrize(
    "text",
    [
        "'%999999999d' % 1",
        "'%s' % facts.x == 'y'",
        "'a' * 1000000000",
        "[0] * 1000000000",
        "'{:999999999}'.format(1)",
        "f'{facts.x:999999999}' == ''",
        "2 ** 999999999",
        "facts.x < 1e999",
    ],
)
def test_unbounded_expressions_are_refused_at_compile(text: str) -> None:
    with pytest.raises(ExpressionInvalidError):
        compile_expression(text)


def test_a_formatting_rule_is_config_invalid_at_load() -> None:
    rule = {"name": "r", "before_tool": "t", "require": "'%999999999d' % 1", "refusal": "x"}
    with pytest.raises(ConfigInvalidError, match="string formatting"):
        build_agent([], [], business_rules=[rule])


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("facts.x % 1 == ''", {"x": "%99999999d"}),
        ("facts.x * 99999999 == ''", {"x": "ab"}),
        ("facts.x + facts.x == []", {"x": list(range(60_000))}),
        ("facts.n * facts.n > 0", {"n": 10**2000}),
    ],
)
def test_values_met_at_run_time_cannot_grow_without_bound(text: str, facts: Any) -> None:
    expression = compile_expression(text)
    with pytest.raises(ExpressionInvalidError):
        expression.evaluate({"facts": facts})


def test_ordinary_arithmetic_still_works() -> None:
    names = {"facts": {"n": 7, "s": "ab", "things": [1, 2]}, "args": {"price": 2.5}}
    text = (
        "facts.n % 2 == 1 and args.price * 2 == 5 and facts.s + 'c' == 'abc'"
        " and len(facts.things + [3]) == 3"
    )
    assert compile_expression(text).evaluate(names) is True


@pytest.mark.parametrize(
    "text",
    [
        "not " * 5000 + "true",
        "not " * 100 + "true",
        " + ".join(["facts.n"] * 60) + " > 0",
        "-" * 500 + "1 < 0",
        "facts.x == " + "1" * 3000,
    ],
)
def test_deep_or_long_expressions_are_refused(text: str) -> None:
    with pytest.raises(ExpressionInvalidError):
        compile_expression(text)


def test_deeply_nested_rule_is_config_invalid_at_load() -> None:
    rule = {"name": "r", "before_tool": "t", "require": "not " * 5000 + "true", "refusal": "x"}
    with pytest.raises(ConfigInvalidError, match="longer than"):
        build_agent([], [], business_rules=[rule])


ATOMS = [
    "1", "0", "2.5", "1e999", "'%9999999d'", "'a'", "facts.s", "facts.n", "facts.big",
    "facts.things", "args.x", "true", "null", "[1, 2]",
]  # fmt: skip
OPERATORS = [" + ", " - ", " * ", " / ", " % ", " ** ", " == ", " < ", " in ", " and ", " or "]
CALLS = ["not {}", "-{}", "len({})", "lower({})", "'{{}}'.format({})", "[{}]"]
NAMES = {
    "facts": {"s": "%9999999d", "n": 3, "big": 10**1200, "things": list(range(50_000))},
    "args": {"x": "x" * 1000},
    "entities": {},
    "result": {},
}


def _grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(OPERATORS), inner).map(lambda t: f"({''.join(t)})"),
        st.tuples(st.sampled_from(CALLS), inner).map(lambda t: t[0].format(t[1])),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
    )


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """Mostly well-formed expressions from the language's pieces, some deeply prefixed."""
    body = draw(st.recursive(st.sampled_from(ATOMS), _grow, max_leaves=12))
    return "not " * draw(st.sampled_from([0, 0, 0, 40, 5000])) + body


def _bounded(value: Any) -> bool:
    """Generous bounds of the property's own (the limits in use are far lower)."""
    if isinstance(value, str | list | tuple):
        return len(value) <= 1_000_000
    if isinstance(value, int):
        return value.bit_length() <= 20_000
    return True


@settings(max_examples=300, deadline=None)
@given(st.one_of(expressions(), st.text(max_size=200)))
def test_any_text_compiles_to_a_bounded_expression_or_is_refused(text: str) -> None:
    try:
        expression = compile_expression(text)
    except ExpressionInvalidError:
        return
    try:
        value = expression.evaluate(NAMES)
    except ExpressionInvalidError:
        return
    assert _bounded(value), f"{text!r} built an unbounded value"


# ----------------------------------------------------------------------- tools.py


def test_tools_syntax_error_is_config_invalid_with_its_line(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path, tools=TOOLS + "def broken(:\n    pass\n")
    err = fails_at_load(tmp_path, folder)
    assert f"tools.py:{TOOLS_LINES + 1}" in err and "syntax" in err


def test_tools_import_exception_is_config_invalid_with_its_line(tmp_path: Path) -> None:
    tools = TOOLS + "\nraise RuntimeError('no [db] configured')\n"
    err = fails_at_load(tmp_path, agent_dir(tmp_path, tools=tools))
    assert f"tools.py:{TOOLS_LINES + 2}" in err
    assert "RuntimeError: no [db] configured" in err


def test_setup_exception_is_config_invalid_with_its_line(tmp_path: Path) -> None:
    tools = TOOLS + textwrap.dedent(
        """
        def setup(data_dir):
            path = data_dir / "db.sqlite"
            raise FileNotFoundError(f"cannot open {path.name}")
        """
    )
    err = fails_at_load(tmp_path, agent_dir(tmp_path, tools=tools))
    assert f"tools.py:{TOOLS_LINES + 4} (in setup)" in err
    assert "FileNotFoundError: cannot open db.sqlite" in err


def test_setup_must_return_a_mapping(tmp_path: Path) -> None:
    tools = TOOLS + "\ndef setup(data_dir):\n    return ['not', 'a', 'mapping']\n"
    with pytest.raises(ConfigInvalidError, match="must return a mapping"):
        load_agent(agent_dir(tmp_path, tools=tools), data_dir=tmp_path / "data")


def test_a_failed_import_is_not_reused(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path, tools=TOOLS + "\nraise ImportError('missing driver')\n")
    with pytest.raises(ConfigInvalidError, match="missing driver"):
        load_agent(folder)
    (folder / "tools.py").write_text(TOOLS, encoding="utf-8")
    assert "lookup" in load_agent(folder).tools


def test_eval_suites_are_read_with_the_same_limits(tmp_path: Path) -> None:
    from corral.testing.evaluation import load_suite

    suite = tmp_path / "eval.yaml"
    suite.write_bytes(b"cases:\n  - name: caf\xe9\n")
    with pytest.raises(ConfigInvalidError, match=r"eval\.yaml:2: not UTF-8"):
        load_suite(suite)


def test_an_unknown_timezone_is_a_config_error_not_a_crash_at_the_first_date() -> None:
    with pytest.raises(ConfigInvalidError, match="unknown timezone 'Mars/Olympus'"):
        parse_config({"name": "x", "intents": [], "timezone": "Mars/Olympus"})
    shanghai = parse_config({"name": "x", "intents": [], "timezone": "Asia/Shanghai"})
    assert shanghai.timezone == "Asia/Shanghai"


def test_an_intent_is_found_by_name_or_alias_the_first_declared_first() -> None:
    """The lookup is indexed; it answers as the scan of ``intents`` in order did."""
    config = parse_config(
        {
            "name": "x",
            "intents": [
                {"name": "refund", "aliases": ["money_back", "return"], "examples": ["a"]},
                {"name": "return", "examples": ["b"]},  # a later name an alias already took
                {"name": "track", "aliases": ["where"], "examples": ["c"]},
            ],
        }
    )
    assert [config.intent(n).name for n in ("refund", "money_back", "return", "where")] == [
        "refund",
        "refund",
        "refund",
        "track",
    ]
    with pytest.raises(ConfigInvalidError, match="no intent named 'nope'"):
        config.intent("nope")
    # The index is a cache: looked up or not, two equal configs stay equal, and a copy
    # with other intents answers from its own.
    assert config == parse_config(config.model_dump())
    narrowed = config.model_copy(update={"intents": config.intents[1:]})
    assert narrowed.intent("return").name == "return"
    with pytest.raises(ConfigInvalidError):
        narrowed.intent("money_back")


def test_a_problem_in_a_template_several_intents_use_is_said_once(tmp_path: Path) -> None:
    """The defect: the orders example's ``order_detail`` plan serves several intents, and
    an unknown tool in it was reported once per intent, the same words each time."""
    from corral.cli.examples import LEFT_BEHIND
    from tests.conftest import ORDERS

    folder = tmp_path / "orders"
    shutil.copytree(ORDERS, folder, ignore=LEFT_BEHIND)
    text = (folder / "agent.yaml").read_text(encoding="utf-8")
    (folder / "agent.yaml").write_text(
        text.replace("tool: get_logistics", "tool: get_logisticz"), encoding="utf-8"
    )
    err = fails_at_load(tmp_path, folder)
    assert err.count("unknown tool 'get_logisticz'") == 1, err


# ------------------------------------------------------- found by a new user's walkthrough


def test_a_schema_problem_names_the_line_it_was_written_on(tmp_path: Path) -> None:
    """``docs/errors.md`` promises file:line; schema problems named only the file, and a
    user had to count list indexes (``intents.0.rules.0...``) in a long agent.yaml."""
    folder = tmp_path / "w"
    shutil.copytree(ROOT / "examples" / "aftersales", folder)
    text = (folder / "agent.yaml").read_text(encoding="utf-8")
    text = text.replace("    route: plan\n", "    rout: plan\n", 1)
    (folder / "agent.yaml").write_text(text, encoding="utf-8")
    line = text.splitlines().index("    rout: plan") + 1
    err = fails_at_load(tmp_path, folder)
    assert f"agent.yaml:{line}: intents.0.rout: Extra inputs are not permitted" in err


def test_each_problem_names_its_own_line_or_its_nearest_parents(tmp_path: Path) -> None:
    text = AGENT_YAML.replace("name: robust", "name: robust\nlimits: {intent_confidence: lots}")
    text += "budget:\n  - 1\n"
    lines = text.splitlines()
    with pytest.raises(ConfigInvalidError) as refused:
        load_config(agent_dir(tmp_path, text) / "agent.yaml")
    message = refused.value.message
    assert f"agent.yaml:{lines.index('limits: {intent_confidence: lots}') + 1}: limits." in message
    assert f"agent.yaml:{lines.index('budget:') + 1}: budget" in message


@pytest.mark.parametrize(("text", "said"), [("", "is empty"), ("- a\n- b\n", "is a list, not")])
def test_an_empty_or_listed_config_says_so(tmp_path: Path, text: str, said: str) -> None:
    """It said ``agent.yaml: : Input should be a valid dictionary or instance of AgentConfig``."""
    err = fails_at_load(tmp_path, agent_dir(tmp_path, text))
    assert f"agent.yaml: the config {said}" in err and "AgentConfig" not in err


def test_plans_naming_tools_without_a_tools_py_say_where_tools_live(tmp_path: Path) -> None:
    """It said ``unknown tool 'query_order' (known tools: )``, no word of the missing file."""
    folder = tmp_path / "w"
    shutil.copytree(ROOT / "examples" / "aftersales", folder)
    (folder / "tools.py").unlink()
    err = fails_at_load(tmp_path, folder)
    assert "unknown tool 'query_order' (known tools: none)" in err
    assert "has no tools.py, where an agent's Python tools live" in err


# ------------------------------------------------ patterns a short message could hold up


EXPLOSIVE = [
    "(a+)+$",
    r"(\w+\s?)*$",
    "(x{1,9})+!",
    "((ab)*)*$",
    "(?:a|b+)+$",
    "(.*a){12}",
    # review of 11499f5: rules ignore case ([A-Z] fences no [a-z]), a bounded outer
    # repeat splits too, and (?x) puts space between a group and its repeat
    r"^(?:[A-Z][a-z]+\s?)+$",
    "(a+){1,10}$",
    "(?x)(a+) +$",
    # review of ac1ec6b: turns multiply, a conditional with no else may match nothing,
    # and an optional part is a variable repeat (found the orders example's 但是? too)
    r"(?:(?:\w+\s*){1,3}[,;]?\s*){1,3}$",
    "((a+){1,3}){1,3}$",
    "(?:(x)?a+(?(1)b))+$",
    "(?:a?){30}a{30}",
    "(?:但是?|是)*x",
]
"""Each splits a run of one character between its turns in exponentially many ways."""
FENCED = [
    r"(\d+,)*\d+",  # each turn ends at a comma
    r"(?:yet\s+|been\s+|be\s+)*done",  # each turn starts with a letter
    "(?>a+)+$",  # atomic: gives nothing back
    "(a++)+$",  # possessive
    r"\b(A\d+)\b",
    r"(?:[a-z]+\.)+com",
    r"(?:\b\w+\b\s*)+",  # \b ends each run of word characters
    "(a+){1,3}",  # three turns at most
    r"(?:\w+(?:\s+|$))+",  # a word ends at white space or at the end
    r"(?:\w+(?=\s)\s*)+",  # ... or where white space follows
    r"(?:\w+(?:\s+|\b))+",
    "(?:但|是)*x",  # the orders example's filler, rewritten
]


def with_rule(tmp_path: Path, pattern: str) -> Path:
    """An agent folder whose intent ``look`` has a rule of ``pattern`` beside its keyword."""
    rule = (
        f"rules: [{{pattern: '{pattern}', confidence: 0.9}}, {{keywords: [go], confidence: 0.95}}]"
    )
    return agent_dir(
        tmp_path, AGENT_YAML.replace("rules: [{keywords: [go], confidence: 0.95}]", rule)
    )


@pytest.mark.parametrize("pattern", EXPLOSIVE)
def test_a_rule_that_a_short_message_could_hold_up_is_refused_at_load(
    tmp_path: Path, pattern: str
) -> None:
    """Found by a hostile review: ``pattern: '(a+)+$'`` loaded, and 27 ``a`` and a ``!``
    held the server's event loop for 21 s (every request waited; 35 would take hours)."""
    err = fails_at_load(tmp_path, with_rule(tmp_path, pattern))
    assert "intent 'look': pattern" in err and "repeats a part that itself repeats" in err
    assert "atomic, (?>a+)" in err  # the hint says how to write it


@pytest.mark.parametrize("pattern", FENCED)
def test_a_repeat_fenced_atomic_or_possessive_loads(tmp_path: Path, pattern: str) -> None:
    load_agent(with_rule(tmp_path, pattern), data_dir=tmp_path / "data")


IN_A_ROW = [
    # the examples' goodbye rule: 4 000 spaces and an x kept a server busy for minutes
    r"^\s*(好的|好|嗯|ok)?[!！。.~～，,\s]*(谢谢|多谢|感谢)?(你|您)?[!！。.~～，,\s]*(再见|拜拜)",
    # the triage example's head count: a digit, then a run of spaces split three ways
    r"(?<![A-Za-z0-9])(\d[\d,]*)\s*(?:多|余)?\s*(?:个|名)?\s*(?:用户|客户)",
    # the examples' rule asking for a person: four in a row after 转人工, n⁴
    r"^\s*(请)?\s*(转人工|人工)\s*(客服)?\s*(吧|啊)?\s*[!！。.~～]*\s*$|(我要)\s*(转)",
    r"\s*[\s,]*x",  # a search free to start anywhere: the start is a third repeat
    r"[\d.,]*\d+元",
    r"^[ab]*[bc]*[bd]*$",  # b is all three's
    r"(?m)^\s*[\s,]*\s*x",  # ^ starts every line
    r"^a*(?:a{0,100})a*b",  # a bounded repeat as long as an unbounded one
    r"^\s*[\s,]*\s*(?=x)",  # a lookahead can fail too
    # a review: runs of two characters (starts on the digits, two splits of the spaces),
    # branches, short repeats of a repeat, and the orders example's refund question
    r"(\d+)\s*(?:元|块)?\s*退款",
    r"[A-Za-z]+\s*[,，]?\s*(?:bye|goodbye)",
    r"^\s*\s*\d*\d*x",
    r"算了|\s*[,，]*\s*不要了",
    r"^\s*(?:\s*|好)\s*再见",
    r"^(?:\s*){3}x",
    # no turn splits into the next (each ends in white space), but each splits its word
    # two ways, four times over: 205 characters took 54 s (it was accepted as fenced)
    r"(?:\w+-?\w*\s+){0,4}?x",
    r"\b(?:where|why)\s+(?:\w+\x27?\w*\s+){0,4}?(?:refund|money\s+back)\b",
    # a review of 5f635ff: a run of two characters has a boundary at each one
    r"\b[\w ]+\b[\w ]+\bx",
]
"""Each has three long repeats in a row that can take one character, and a part after
them that can fail: a run of that character is split between them in n³ ways."""
SIDE_BY_SIDE = [
    r"^\s*+(好的|好|嗯|ok)?[!！。.~～，,\s]*+(谢谢|多谢|感谢)?(你|您)?[!！。.~～，,\s]*+(再见|拜拜)",
    r"^\s*[\s,]*x",  # two in a row: n², a fraction of a second at the size limit
    r"^y\s*[\s,]*\s*",  # nothing after them can fail: the first try matches
    r"^a*b*c*d$",  # no character all three take
    r"(不要|不想|不)\s*(申请|给我)?\s*(退款|退钱)",  # a search starts only at 不
    r"^\s*x\s*\s*\s*",
    r"^a*(?:a{0,9})a*b",  # a short repeat multiplies by ten at most
    r"(?i)([-−+]?\d[\d.,，eE+\-\s]*(?:块钱|块|元|rmb))",
    r"(\d+)\s*元",
    r"\b(?:where|why)\s+(?:\w+(?:\x27\w*)?\s+){0,4}?(?:refund|money\s+back)\b",
    r"(?i)\bhow\s+long\b.*\brefund",
    r"\w+\s+\w+\s+\w+",
    # a review of dea14db: where a search may start is bounded by \b or a lookbehind
    r"(?<!\d)(\d+)\s*(?:元|块)?\s*退款",
    r".{0,40}(改|换).{0,40}地址",  # short repeats: a constant each
    r"[A-Z]{2,20}\d{4,12}x",
]


@pytest.mark.parametrize("pattern", IN_A_ROW)
def test_three_long_repeats_in_a_row_are_refused_at_load(tmp_path: Path, pattern: str) -> None:
    """Found by timing hostile messages: 2 000 spaces and an ``x`` kept the after-sales
    and triage agents' goodbye rule busy for 42 s, 4 000 (the size limit) for minutes."""
    err = fails_at_load(tmp_path, with_rule(tmp_path, pattern))
    assert "intent 'look': pattern" in err and "3 long repeats in a row" in err
    assert "possessive, as in \\s*+" in err


@pytest.mark.parametrize("pattern", SIDE_BY_SIDE)
def test_repeats_side_by_side_that_cannot_explode_load(tmp_path: Path, pattern: str) -> None:
    load_agent(with_rule(tmp_path, pattern), data_dir=tmp_path / "data")


def test_entity_and_redaction_patterns_are_checked_too(tmp_path: Path) -> None:
    entity = AGENT_YAML + "entities:\n  code: {kind: pattern, patterns: ['(\\w+\\s?)*$']}\n"
    with pytest.raises(ConfigInvalidError, match="entity 'code': pattern"):
        load_agent(agent_dir(tmp_path, entity), data_dir=tmp_path / "data")
    redaction = AGENT_YAML + "redaction: {patterns: ['(a+)+$']}\n"
    with pytest.raises(ConfigInvalidError, match="repeats a part that itself repeats"):
        load_config(agent_dir(tmp_path, redaction) / "agent.yaml")
    in_a_row = AGENT_YAML + "redaction: {patterns: ['\\s*[\\s,]*x']}\n"
    with pytest.raises(ConfigInvalidError, match="3 long repeats in a row"):
        load_config(agent_dir(tmp_path, in_a_row) / "agent.yaml")


# ``re``'s own parser warns of a set that later Pythons read otherwise ("[[", "[--"); the
# check parses what ``re.compile`` parses, and warns as it would: not this test's subject
@pytest.mark.filterwarnings("ignore::FutureWarning")
@given(st.text(alphabet="ab()[]*+?{}|\\.,:^$<>=!dws019", max_size=40))
@settings(max_examples=400, deadline=None)
def test_the_repeat_check_answers_for_any_text(text: str) -> None:
    """A pattern that does not parse is ``re.compile``'s to report; the check never raises."""
    from corral.regex_checks import nested_repeat

    assert nested_repeat(text) in (True, False)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@given(st.text(alphabet="ab()[]*+?{}|\\.,:^$<>=!dws019", max_size=40))
@settings(max_examples=400, deadline=None)
def test_the_row_check_answers_for_any_text(text: str) -> None:
    from corral.regex_checks import repeats_in_a_row

    assert repeats_in_a_row(text) in (True, False)


def test_an_anchored_value_is_placed_where_it_is_written_and_the_whole_config_nowhere(
    tmp_path: Path,
) -> None:
    """Review of 1f44ac8: the anchor's path took the rules' line (the alias claimed the
    node), and a problem of the whole config was pinned to line 1."""
    text = AGENT_YAML.replace(
        "    rules: [{keywords: [go], confidence: 0.95}]",
        "    rules:\n      - &r\n        keywords: [go]\n        confidence: 5",
    ).replace("plans:\n", "  - {name: again, plan: p, reply: done, rules: [*r]}\nplans:\n")
    lines = text.splitlines()
    with pytest.raises(ConfigInvalidError) as refused:
        load_config(agent_dir(tmp_path, text) / "agent.yaml")
    written = lines.index("        confidence: 5") + 1
    anchored = lines.index("      - &r") + 1
    assert f"agent.yaml:{written}: intents.0.rules.0.confidence" in refused.value.message
    assert f"agent.yaml:{anchored}: intents.1.rules.0.confidence" in refused.value.message
    whole = AGENT_YAML + "telemetry: {sampling: {critical_intents: [nobody]}}\n"
    with pytest.raises(ConfigInvalidError) as refused:
        load_config(agent_dir(tmp_path, whole) / "agent.yaml")
    assert "agent.yaml:1:" not in refused.value.message


def test_a_pattern_re_refuses_with_a_value_error_is_config_invalid(tmp_path: Path) -> None:
    """Review of ac1ec6b: ``(?a)(?u)go`` is a ``ValueError``, not an ``re.error``: a traceback."""
    rule = "rules: [{pattern: '(?a)(?u)go', confidence: 0.9}]"
    text = AGENT_YAML.replace("rules: [{keywords: [go], confidence: 0.95}]", rule)
    assert "bad rule '(?a)(?u)go'" in fails_at_load(tmp_path, agent_dir(tmp_path, text))


@pytest.mark.parametrize(
    ("change", "line", "said"),
    [
        # the intent's plan, a step's tool, a business rule's tool and its refusal: each
        # was refused with its names only, and a long agent.yaml left the user to search
        (("    plan: p\n", "    plan: pp\n"), 5, "intent look: plan template 'pp' is missing"),
        (("        tool: lookup\n", "        tool: lookupp\n"), 11, "s1: unknown tool 'lookupp'"),
        (
            (
                "templates:\n",
                "business_rules:\n  - name: r\n    before_tool: lookupp\n"
                "    require: 'true'\n    refusal: done\ntemplates:\n",
            ),
            15,
            "business rule r: unknown tool 'lookupp'",
        ),
        (
            (
                "templates:\n",
                "business_rules:\n  - name: r\n    before_tool: lookup\n"
                "    require: 'true'\n    refusal: nope\ntemplates:\n",
            ),
            17,
            "business rule r: template 'nope' is missing",
        ),
        (("    reply: done\n", "    reply: done\n    requires: [order]\n"), 7, "requires 'order'"),
        # a review: the intent's reply was named at the plan, a step's other keys at the step
        (("    reply: done\n", "    reply: donez\n"), 6, "plan p: template 'donez' is missing"),
        (
            (
                "        args: {items: [a]}\n",
                "        args: {items: [a]}\n        depends_on: [s9]\n",
            ),
            13,
            "s1: depends on unknown step 's9'",
        ),
        (("args: {items: [a]}", "args: {itemz: [a]}"), 12, "lookup has no parameter 'itemz'"),
    ],
)
def test_a_name_that_points_nowhere_is_refused_with_its_line(
    tmp_path: Path, change: tuple[str, str], line: int, said: str
) -> None:
    """Problems found once the config is whole (what a name points at) name their line."""
    assert change[0] in AGENT_YAML
    folder = agent_dir(tmp_path, AGENT_YAML.replace(change[0], change[1], 1))
    written = (folder / "agent.yaml").read_text(encoding="utf-8").splitlines()
    assert said.split("'")[1] in written[line - 1]  # the line named is the one at fault
    err = fails_at_load(tmp_path, folder)
    assert f"agent.yaml:{line}: " in err and said in err, err
    with pytest.raises(ConfigInvalidError, match=rf"agent\.yaml:{line}: ") as caught:
        load_agent(folder, data_dir=tmp_path / "data")
    assert any(location for location, _ in caught.value.problems)


def load_refused(tmp_path: Path, yaml_text: str) -> str:
    """The message of ``load_agent``'s ``ConfigInvalidError`` for an agent.yaml of this text."""
    with pytest.raises(ConfigInvalidError) as caught:
        load_agent(agent_dir(tmp_path, yaml_text), data_dir=tmp_path / "data")
    return caught.value.message


def test_a_problem_with_no_place_of_its_own_is_named_as_before(tmp_path: Path) -> None:
    """Two problems, one located: the other keeps its words, with no line made up."""
    text = AGENT_YAML.replace("    plan: p\n", "    plan: pp\n").replace(
        "templates:\n", "tool_constraints: {nope: 'true'}\ntemplates:\n"
    )
    message = load_refused(tmp_path, text)
    assert "agent.yaml:5: intent look: plan template 'pp' is missing" in message
    assert "; tool constraint: unknown tool 'nope'" in message


def test_a_step_id_two_steps_share_names_the_plan_not_the_first_of_them(tmp_path: Path) -> None:
    """A review: the second s1's unknown tool was named at the first s1, which is fine."""
    text = AGENT_YAML.replace("templates:\n", "      - id: s1\n        tool: lookupp\ntemplates:\n")
    message = load_refused(tmp_path, text)
    assert "agent.yaml:8: plan p: step id 's1' is used twice" in message
    assert "agent.yaml:8: plan p: s1: unknown tool 'lookupp'" in message


def test_the_same_mistake_in_two_places_names_both_lines(tmp_path: Path) -> None:
    rule = "  - name: r\n    before_tool: lookupp\n    require: 'true'\n    refusal: done\n"
    text = AGENT_YAML.replace("templates:\n", f"business_rules:\n{rule}{rule}templates:\n")
    assert "agent.yaml:15, 19: business rule r: unknown tool 'lookupp'" in load_refused(
        tmp_path, text
    )
