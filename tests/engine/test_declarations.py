"""The ``scratchpad_read`` declarations as their consumers see them: each shape accepted by its SDK's own types
(and refused by the others'), every schema valid JSON Schema, the strict ones valid under OpenAI's strict rules
by the Agents SDK's and pydantic-ai's own checkers, and the parser agreeing with every schema on what a valid
call is. Also: the offer (``Scratchpad.tools``) fails soft like ``call_tool``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging

import mcp.types
import pytest
from agents.strict_schema import ensure_strict_json_schema
from anthropic.types import ToolParam
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter, ValidationError
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

from vault import InvalidArgument, tool_declaration
from vault.engine import FAULT, Scratchpad
from vault.engine.tool_args import MAX_UNITS, parse_arguments

SHAPES = [("neutral", False), ("openai", False), ("openai", True), ("openai-responses", False),
          ("openai-responses", True), ("anthropic", False), ("mcp", False)]
STRICT = [("openai", True), ("openai-responses", True)]
# sha256 of json.dumps of each lenient shape: what users send their models changes only deliberately
PINNED = {"neutral": "558ccd80170cc2a4960e34729487819827d363cd301c40d9bcb2662d0fe34530",
          "openai": "4fb6cff29e3fa4631ae76b9786fef6f30432442ef01db4e9935aae54b242c284",
          "anthropic": "a6fd3add76f2680ae98609a7b0ab0d59316c8e3080f3e61f03ed6c370e6ea061",
          "mcp": "b47934834d1c5f14ef3dce90e471803d2825bcd066dad58dab35dcf943cba80f"}
ID = "0123456789abcdef" * 2


def parameters(shape: str, strict: bool) -> dict:
    declaration = tool_declaration(shape, strict=strict)
    for key in ("parameters", "input_schema", "inputSchema"):
        if key in declaration:
            return declaration[key]
    return declaration["function"]["parameters"]


def typed_dict_accepts(typed_dict: type, declaration: dict) -> bool:
    """Valid for the SDK's TypedDict without coercion, and nothing dropped (pydantic ignores unknown keys)."""
    try:
        return TypeAdapter(typed_dict).validate_python(declaration, strict=True) == declaration
    except ValidationError:
        return False


def mcp_accepts(declaration: dict) -> bool:
    try:
        tool = mcp.types.Tool.model_validate(declaration, strict=True)
    except ValidationError:
        return False
    return tool.model_dump(by_alias=True, exclude_unset=True) == declaration


CONSUMERS = {
    ("openai", False): lambda d: typed_dict_accepts(ChatCompletionToolParam, d),
    ("openai", True): lambda d: typed_dict_accepts(ChatCompletionFunctionToolParam, d)
    and d["function"].get("strict") is True,
    ("openai-responses", False): lambda d: typed_dict_accepts(FunctionToolParam, d) and d["strict"] is False,
    ("openai-responses", True): lambda d: typed_dict_accepts(FunctionToolParam, d) and d["strict"] is True,
    ("anthropic", False): lambda d: typed_dict_accepts(ToolParam, d),
    ("mcp", False): mcp_accepts,
}


# -- shapes --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", sorted(PINNED))
def test_the_lenient_shapes_are_pinned_byte_for_byte(shape):
    assert hashlib.sha256(json.dumps(tool_declaration(shape)).encode()).hexdigest() == PINNED[shape]
    assert tool_declaration(shape, strict=False) == tool_declaration(shape)


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_each_sdk_type_accepts_its_own_shape_and_refuses_the_others(consumer):
    accepts = CONSUMERS[consumer]
    for shape, strict in SHAPES:
        own = (shape, strict) == consumer or (consumer == ("openai", False) and (shape, strict) == ("openai", True))
        assert accepts(tool_declaration(shape, strict=strict)) == own, (shape, strict)


def test_the_chat_shape_is_refused_where_the_responses_api_wants_a_flat_tool():
    assert not typed_dict_accepts(FunctionToolParam, tool_declaration("openai"))
    assert typed_dict_accepts(FunctionToolParam, tool_declaration("openai-responses"))


@pytest.mark.parametrize(("shape", "strict"), SHAPES)
def test_every_schema_is_valid_json_schema(shape, strict):
    Draft202012Validator.check_schema(parameters(shape, strict))


@pytest.mark.parametrize(("shape", "strict"), STRICT)
def test_strict_schemas_pass_the_agents_sdk_and_pydantic_ai_strict_checks_unchanged(shape, strict):
    schema = parameters(shape, strict)
    assert ensure_strict_json_schema(copy.deepcopy(schema)) == schema
    transformer = OpenAIJsonSchemaTransformer(copy.deepcopy(schema), strict=None)
    assert transformer.walk() == schema
    assert transformer.is_strict_compatible
    assert schema["required"] == list(schema["properties"]) and schema["additionalProperties"] is False
    assert "default" not in json.dumps(schema)


def test_the_lenient_schema_is_the_one_pydantic_ai_reports_as_not_strict():
    transformer = OpenAIJsonSchemaTransformer(copy.deepcopy(parameters("openai", False)), strict=None)
    transformer.walk()
    assert not transformer.is_strict_compatible  # why the strict shape exists


@pytest.mark.parametrize("shape", ["neutral", "anthropic", "mcp", "gemini", None])
def test_strict_is_refused_where_a_shape_has_no_strict_mode_and_shapes_are_checked(shape):
    with pytest.raises(InvalidArgument):
        tool_declaration(shape, strict=True)
    with pytest.raises(InvalidArgument):
        tool_declaration("openai", strict=1)


# -- the parser agrees with each schema ----------------------------------------------------------------
units = st.integers(min_value=-2, max_value=40) | st.sampled_from([5.0, 2.5, True, "3", 2**53])
field_values = {
    "id": st.sampled_from([ID, ID.upper(), "", 5, None]),
    "mode": st.sampled_from(["head", "tail", "range", "full", "all", None, 1]),
    "n": units | st.none(), "start": units | st.none(), "end": units | st.none(), "user_id": st.just("bob"),
}
small = st.integers(min_value=0, max_value=40) | st.none()
well_formed = {"id": st.just(ID), "mode": st.sampled_from(["head", "tail", "range", "full"]), "n": small,
               "start": small, "end": small}
arguments = (st.fixed_dictionaries({}, optional=field_values)  # anything, mostly wrong
             | st.fixed_dictionaries({"id": st.just(ID)}, optional={k: v for k, v in well_formed.items() if k != "id"})
             | st.fixed_dictionaries(well_formed))  # the strict form: every field


def parser_accepts(args: dict) -> bool:
    try:
        parse_arguments(args)
    except InvalidArgument:
        return False
    return True


def canonical(args: dict, strict: bool) -> dict:
    """What the parser accepted, in the schema's own form: a well-formed id, and the strict form's every
    field (null for an unused one) or the lenient form's null fields left out."""
    args = {**args, "id": ID}
    if strict:
        return {"mode": "head", **{name: args.get(name) for name in ("id", "n", "start", "end", "query",
                                                                     "ignore_case")},
                **{k: v for k, v in args.items() if k == "mode"}}
    return {key: value for key, value in args.items() if value is not None}


@pytest.mark.parametrize(("shape", "strict"), [("neutral", False), ("openai-responses", False), ("openai", True)])
@settings(max_examples=300, deadline=None)
@given(args=arguments)
def test_the_parser_accepts_every_call_a_schema_allows_and_the_schema_allows_every_call_it_accepts(
        shape, strict, args):
    schema = Draft202012Validator(parameters(shape, strict))
    says_range = shape == "openai-responses" and not strict  # the one that says "start and end only with range"
    if schema.is_valid(args) and not parser_accepts(args):
        start, end = args.get("start"), args.get("end")
        outside_range = args.get("mode", "head") != "range" and (start, end) != (None, None)
        huge = any(isinstance(args.get(name), int) and args[name] > MAX_UNITS for name in ("n", "start", "end"))
        assert (start is not None and end is not None and end < start) or (outside_range and not says_range) or huge
    if parser_accepts(args):
        assert schema.is_valid(canonical(args, strict)), canonical(args, strict)


# -- calls a strict-mode model makes -------------------------------------------------------------------
def test_a_strict_mode_model_reads_head_tail_and_range_with_nulls_for_unused_fields(vault, alice):
    pad = Scratchpad(vault)
    row = pad.observe(alice, "t1", 1, "tool", "0123456789" * 500)["id"]
    unused = {"query": None, "ignore_case": None}
    calls = [({"mode": "head", "n": 5, "start": None, "end": None, **unused}, "01234"),
             ({"mode": "tail", "n": 3, "start": None, "end": None, **unused}, "789"),
             ({"mode": "range", "n": None, "start": 12, "end": 15, **unused}, "234"),
             ({"mode": "range", "n": None, "start": 4_998, "end": None, **unused}, "89")]
    for call, content in calls:
        assert pad.call_tool(alice, "t1", json.dumps({"id": row, **call})).get("content") == content
        assert Draft202012Validator(parameters("openai", True)).is_valid({"id": row, **call})
    find = {"id": row, "mode": "find", "n": 2, "start": None, "end": None, "query": "890", "ignore_case": None}
    assert Draft202012Validator(parameters("openai", True)).is_valid(find)
    assert [match["offset"] for match in pad.call_tool(alice, "t1", find)["matches"]] == [8, 18]
    assert len(pad.call_tool(alice, "t1", {"id": row, "mode": "head", "n": None})["content"]) == 2000


def test_nulls_do_not_open_what_the_parser_refused(vault, alice):
    pad = Scratchpad(vault)
    row = pad.observe(alice, "t1", 1, "tool", "x" * 5000)["id"]
    for call in ({"mode": None}, {"mode": "head", "start": 1, "end": None}, {"mode": "full", "end": 0},
                 {"id": None}, {"mode": "range", "start": 5, "end": 2, "n": None}):
        assert pad.call_tool(alice, "t1", {"id": row, **call})["error"].startswith("invalid arguments: ")


# -- the offer fails soft ------------------------------------------------------------------------------
def test_tools_offers_nothing_on_a_vault_fault_and_logs_only_the_error_type(vault, alice, caplog):
    pad = Scratchpad(vault)
    row = pad.observe(alice, "t1", 1, "tool", "SECRET" * 1000)["id"]
    assert pad.tools(alice, "t1") == [tool_declaration()]
    vault.close()
    with caplog.at_level(logging.DEBUG, logger="scratchvault.engine"):
        assert pad.tools(alice, "t1") == []
        assert pad.call_tool(alice, "t1", {"id": row}) == FAULT
    logged = [record.getMessage() for record in caplog.records if record.name == "scratchvault.engine"]
    assert logged == ["scratchpad tools failed: StorageError", "scratchpad_read failed: StorageError"]
    with pytest.raises(InvalidArgument):  # the runtime's bug stays loud
        pad.tools("alice", "t1")
    with pytest.raises(InvalidArgument):
        pad.tools(alice, "t1", "openai", strict="yes")


def test_tools_offers_the_strict_shapes(vault, alice):
    pad = Scratchpad(vault)
    pad.observe(alice, "t1", 1, "tool", "x" * 5000)
    for shape, strict in SHAPES:
        assert pad.tools(alice, "t1", shape, strict=strict) == [tool_declaration(shape, strict=strict)]
