"""The openai-compatible provider's dialects, read from the families' documented formats.

Pure tests: no server. Vectors come from the families' own material (Qwen's cookbooks and
``agent_function_call.py``, UI-TARS 1.5's prompt, deployment guide and coordinate guide), as
collected in ``local-vlm-dialects.md`` section 9. Property tests feed random and hostile
replies to every dialect: the result is calls on the 0-999 grid, a finish, or a ParseError.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from vnc_use.actions import GEMINI_35_DESKTOP_TABLE, ValidatedAction, denorm
from vnc_use.providers.openai_compat import dialect_for_model
from vnc_use.providers.openai_compat.dialects import (
    DIALECT_NAMES,
    Parsed,
    ParseError,
    dialect_by_name,
)
from vnc_use.providers.openai_compat.dialects.tools import function_tools
from vnc_use.providers.openai_compat.resize import (
    QWEN25_VL,
    UI_TARS,
    PixelLimits,
    png_size,
    resize_png,
    smart_resize,
)


def text(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def native(*calls: tuple[str, Any], content: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


def block(name: str, args: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def parse(dialect: str, message: dict[str, Any], size: tuple[int, int] | None = None) -> Parsed:
    d = dialect_by_name(dialect)
    return d.parse(message, d.frame(size, None))


def only(parsed: Parsed) -> tuple[str, dict[str, Any]]:
    assert len(parsed.calls) == 1, parsed
    call = parsed.calls[0]
    return call.name, {k: v for k, v in call.args.items() if k != "intent"}


# ------------------------------------------------------------------ choosing a dialect


@pytest.mark.parametrize(
    ("model", "dialect"),
    [
        ("ByteDance-Seed/UI-TARS-1.5-7B", "ui-tars"),
        ("ui-tars-1.5-7b@q4_k_m", "ui-tars"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", "qwen3-vl"),
        ("qwen3-vl:8b", "qwen3-vl"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl"),
        ("qwen2_5-vl-7b", "qwen2.5-vl"),
        ("qwen2.5vl:7b", "qwen2.5-vl"),  # Ollama's spelling
        ("qwen2.5-coder", "tools"),
        ("Hcompany/Holo-3.1-35B-A3B", "holo"),
        ("holo3-1-35b-a3b", "holo"),  # H Company's API id
        ("inclusionAI/UI-Venus-1.5-8B", "ui-venus"),
        ("xlangai/OpenCUA-7B", "opencua"),
        ("Qwen/Qwen3.5-35B-A3B", "qwen3-vl"),  # unverified: no 3.5 format of its own found
        ("qwen3.5:9b", "qwen3-vl"),
        ("gpt-4o", "tools"),
        ("llava", "tools"),
    ],
)
def test_the_dialect_defaults_from_the_model_id(model: str, dialect: str) -> None:
    assert dialect_for_model(model) == dialect


# ------------------------------------------------------------------ resize


@pytest.mark.parametrize(
    ("size", "limits", "expected"),
    [
        ((800, 1280), QWEN25_VL, (812, 1288)),
        ((900, 1440), QWEN25_VL, (896, 1428)),
        ((2400, 1080), QWEN25_VL, (2408, 1092)),  # the Qwen2.5 cookbook's declared 1092x2408
        ((1280, 720), QWEN25_VL, (1288, 728)),  # ... and 728x1288
        ((900, 1440), PixelLimits(28, 3136, 1280 * 28 * 28), (784, 1260)),
        ((800, 1280), PixelLimits(32, 4 * 32 * 32, 16384 * 32 * 32), (800, 1280)),
        ((10, 10), QWEN25_VL, (56, 56)),  # min_pixels: Qwen2.5 vs UI-TARS differ on tiny images
        ((10, 10), UI_TARS, (280, 280)),
    ],
)
def test_smart_resize_matches_the_processor(
    size: tuple[int, int], limits: PixelLimits, expected: tuple[int, int]
) -> None:
    assert smart_resize(*size, limits) == expected


@given(st.integers(28, 4000), st.integers(28, 4000))
def test_a_resized_size_is_a_fixed_point_and_a_multiple_of_28(h: int, w: int) -> None:
    if max(h, w) / min(h, w) > 200:
        return
    rh, rw = smart_resize(h, w, UI_TARS)
    assert rh % 28 == 0 and rw % 28 == 0
    assert smart_resize(rh, rw, UI_TARS) == (rh, rw)


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (40, 90, 160)).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize("dialect", ["qwen2.5-vl", "ui-tars"])
def test_pixels_map_back_through_the_size_sent_not_the_screen(dialect: str) -> None:
    """A 1021x767 screen (not a multiple of 28) is sent as 1008x756; a point the model gives
    in those pixels lands on the same screen pixel, where mapping through the screen size
    would not."""
    screen = (1021, 767)
    png, sent = resize_png(_png(*screen), UI_TARS if dialect == "ui-tars" else QWEN25_VL)
    assert sent == (1008, 756) and png_size(png) == sent
    target = (700, 300)  # a widget at screen pixel (700, 300)
    model_x, model_y = (
        round(target[0] * sent[0] / screen[0]),
        round(target[1] * sent[1] / screen[1]),
    )
    if dialect == "ui-tars":
        reply = text(f"Thought: the widget.\nAction: click(start_box='({model_x},{model_y})')")
    else:
        args = {"action": "left_click", "coordinate": [model_x, model_y]}
        reply = text(block("computer_use", args))
    name, args = only(parse(dialect, reply, sent))
    assert name == "click"
    px = denorm(args["x"], args["y"], *screen)
    assert abs(px[0] - target[0]) <= 1 and abs(px[1] - target[1]) <= 1
    wrong = (round(model_x / screen[0] * 1000), round(model_y / screen[1] * 1000))
    assert denorm(*wrong, *screen) != px  # the screen-size mapping misses


def test_a_screenshot_already_at_the_sent_size_is_sent_unchanged() -> None:
    png = _png(1428, 896)
    assert resize_png(png, UI_TARS) == (png, (1428, 896))


# ------------------------------------------------------------------ ui-tars


UI = (1428, 896)  # what a 1440x900 screen is sent as


def test_ui_tars_click_from_the_deployment_guide() -> None:
    parsed = parse(
        "ui-tars",
        text("Thought: 让我点击它看看里面有什么选项。\nAction: click(start_box='(714,448)')"),
        UI,
    )
    assert only(parsed) == ("click", {"x": 500, "y": 500})
    assert parsed.calls[0].args["intent"] == "让我点击它看看里面有什么选项。"


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("click(start_box='<|box_start|>(714,448)<|box_end|>')", ("click", {"x": 500, "y": 500})),
        ("click(start_box='(714, 448)')", ("click", {"x": 500, "y": 500})),
        ("click(start_box='(700,400,728,496)')", ("click", {"x": 500, "y": 500})),
        ("click(point='<point>714 448</point>')", ("click", {"x": 500, "y": 500})),
        ("left_single(start_box='(0,0)')", ("click", {"x": 0, "y": 0})),
        ("left_double(start_box='(1428,896)')", ("double_click", {"x": 999, "y": 999})),
        ("right_single(start_box='(714,448)')", ("right_click", {"x": 500, "y": 500})),
        ("hover(start_box='(714,448)')", ("move", {"x": 500, "y": 500})),
        (
            "drag(start_box='(143,90)', end_box='(714,448)')",
            ("drag_and_drop", {"start_x": 100, "start_y": 100, "end_x": 500, "end_y": 500}),
        ),
        ("hotkey(key='ctrl a')", ("hotkey", {"keys": ["ctrl", "a"]})),
        ("hotkey(key='enter')", ("press_key", {"key": "enter"})),
        ("type(content='abc\\n')", ("type", {"text": "abc", "press_enter": True})),
        ("type(content='it\\'s')", ("type", {"text": "it's", "press_enter": False})),
        (
            "scroll(start_box='(714,448)', direction='down')",
            ("scroll", {"x": 500, "y": 500, "direction": "down", "magnitude_in_pixels": 500}),
        ),
        ("wait()", ("wait", {"seconds": 5})),
    ],
)
def test_ui_tars_actions(action: str, expected: tuple[str, dict[str, Any]]) -> None:
    assert only(parse("ui-tars", text(f"Thought: t\nAction: {action}"), UI)) == expected


def test_ui_tars_action_on_the_thought_line_and_without_an_image() -> None:
    one_line = parse(
        "ui-tars", text("Thought: the OK button. Action: click(start_box='(0,0)')"), UI
    )
    assert only(one_line) == ("click", {"x": 0, "y": 0})
    with pytest.raises(ParseError, match="No screenshot"):
        parse("ui-tars", text("Action: click(start_box='(0,0)')"), None)
    typed = parse("ui-tars", text("Action: type(content='no image needed')"), None)
    assert only(typed)[0] == "type"


def test_ui_tars_several_actions_and_finished() -> None:
    parsed = parse("ui-tars", text("Action: click(start_box='(0,0)')\n\nwait()"), UI)
    assert [c.name for c in parsed.calls] == ["click", "wait"]
    done = parse("ui-tars", text("Thought: all set.\nAction: finished(content='It\\'s done')"), UI)
    assert done.finished and done.text == "It's done" and not done.calls


@pytest.mark.parametrize(
    "reply",
    [
        "I will click the OK button.",  # free text
        "Action: click(start_box='(1429,10)')",  # off the image sent
        "Action: click(start_box='(-1,10)')",
        "Action: click(start_box='(10)')",
        "Action: click(start_box='(10,20)'",  # not closed
        "Action: teleport(start_box='(10,20)')",
        "Action: scroll(start_box='(10,20)', direction='sideways')",
        "Action: type(content='abc)",
        "Action: ",
    ],
)
def test_ui_tars_unusable_replies_are_errors(reply: str) -> None:
    with pytest.raises(ParseError):
        parse("ui-tars", text(reply), UI)


# ------------------------------------------------------------------ qwen


def test_qwen25_click_in_pixels_of_the_declared_size() -> None:
    """The reference's worked example: 1280x800 sent as 1288x812, [644, 406] -> pixel (640, 400)."""
    reply = text(block("computer_use", {"action": "left_click", "coordinate": [644, 406]}))
    name, args = only(parse("qwen2.5-vl", reply, (1288, 812)))
    assert (name, denorm(args["x"], args["y"], 1280, 800)) == ("click", (640, 400))


def test_qwen3_relative_coordinates_whatever_the_image() -> None:
    reply = text(
        'Thought: the search bar.\nAction: "tap it"\n'
        + block("computer_use", {"action": "left_click", "coordinate": [500, 500]})
    )
    for size in [(1280, 800), (3840, 2160), None]:
        parsed = parse("qwen3-vl", reply, size)
        assert only(parsed) == ("click", {"x": 500, "y": 500})
        assert parsed.calls[0].args["intent"] == "the search bar."
    edge = text(block("computer_use", {"action": "left_click", "coordinate": [1000, 0]}))
    assert only(parse("qwen3-vl", edge)) == ("click", {"x": 999, "y": 0})


def test_qwen3_mobile_cookbook_output() -> None:
    reply = text(
        "Thought: To search for Musk in X, I need to click on the search bar.\n"
        'Action: "I tapped on the search bar."\n'
        '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", '
        '"coordinate": [447, 81]}}\n</tool_call>'
    )
    assert only(parse("qwen3-vl", reply)) == ("click", {"x": 447, "y": 81})


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"action": "type", "text": "hello\n"}, ("type", {"text": "hello", "press_enter": True})),
        ({"action": "key", "keys": ["ctrl", "c"]}, ("hotkey", {"keys": ["ctrl", "c"]})),
        ({"action": "key", "keys": ["Return"]}, ("press_key", {"key": "Return"})),
        (
            {"action": "scroll", "pixels": -5, "coordinate": [500, 500]},
            ("scroll", {"x": 500, "y": 500, "direction": "down", "magnitude_in_pixels": 5}),
        ),
        (
            {"action": "scroll", "pixels": 2000},
            ("scroll", {"x": 500, "y": 500, "direction": "up", "magnitude_in_pixels": 999}),
        ),
        ({"action": "wait", "time": 2}, ("wait", {"seconds": 2})),
        ({"action": "triple_click", "coordinate": [1, 2]}, ("triple_click", {"x": 1, "y": 2})),
        ({"action": "mouse_move", "coordinate": [10, 20]}, ("move", {"x": 10, "y": 20})),
    ],
)
def test_qwen_actions(args: dict[str, Any], expected: tuple[str, dict[str, Any]]) -> None:
    assert only(parse("qwen3-vl", text(block("computer_use", args)))) == expected


def test_qwen_drag_starts_at_the_pointer_and_a_bare_click_clicks_there() -> None:
    reply = text(
        block("computer_use", {"action": "mouse_move", "coordinate": [100, 200]})
        + block("computer_use", {"action": "left_click_drag", "coordinate": [300, 400]})
        + block("computer_use", {"action": "left_click"})
    )
    parsed = parse("qwen3-vl", reply)
    assert [(c.name, {k: v for k, v in c.args.items() if k != "intent"}) for c in parsed.calls] == [
        ("move", {"x": 100, "y": 200}),
        ("drag_and_drop", {"start_x": 100, "start_y": 200, "end_x": 300, "end_y": 400}),
        ("click", {"x": 300, "y": 400}),
    ]
    d = dialect_by_name("qwen2.5-vl")
    known = d.parse(
        text(block("computer_use", {"action": "left_click"})), d.frame((1288, 812), (7, 8))
    )
    assert only(known) == ("click", {"x": 7, "y": 8})


def test_qwen_finishes() -> None:
    done = parse(
        "qwen3-vl",
        text(
            "Thought: finished.\n"
            + block("computer_use", {"action": "terminate", "status": "success"})
        ),
    )
    assert done.finished and done.text == "finished."
    answer = parse("qwen3-vl", text(block("computer_use", {"action": "answer", "text": "42"})))
    assert answer.finished and answer.text == "42"


def test_qwen_native_tool_calls_are_read_too() -> None:
    reply = native(("computer_use", {"action": "left_click", "coordinate": [250, 750]}))
    parsed = parse("qwen3-vl", reply)
    assert only(parsed) == ("click", {"x": 250, "y": 750})
    assert parsed.calls[0].source_id == "call_0"


@pytest.mark.parametrize(
    "reply",
    [
        "I would click the button at the top.",
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click"',
        "<tool_call>not json</tool_call>",
        block("computer_use", {"action": "left_click", "coordinate": [1001, 5]}),
        block("computer_use", {"action": "left_click", "coordinate": [5]}),
        block("computer_use", {"action": "left_click", "coordinate": "here"}),
        block("computer_use", {"action": "fly"}),
        block("computer_use", {"action": "left_click_drag", "coordinate": [5, 5]}),  # no start
        block("computer_use", {"action": "left_click"}),  # no pointer yet
        block("shell", {"cmd": "rm -rf /"}),
        '<tool_call>{"name": "computer_use", "arguments": '
        '{"action": "scroll", "pixels": Infinity}}</tool_call>',
        '<tool_call>{"name": "computer_use", "arguments": '
        '{"action": "wait", "time": Infinity}}</tool_call>',
        '<tool_call>{"name": "computer_use", "arguments": '
        '{"action": "left_click", "coordinate": [NaN, 1]}}</tool_call>',
    ],
)
def test_qwen_unusable_replies_are_errors(reply: str) -> None:
    with pytest.raises(ParseError):
        parse("qwen3-vl", text(reply))


# ------------------------------------------------------------------ tools


def test_tools_declares_the_35_desktop_set_and_finish() -> None:
    names = [t["function"]["name"] for t in function_tools()]
    assert sorted(names) == sorted([*GEMINI_35_DESKTOP_TABLE.names, "finish"])
    for tool in function_tools():
        assert "intent" not in tool["function"]["parameters"]["required"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"x": 578, "y": 172}, {"x": 578, "y": 172}),
        ({"x": [100, 200]}, {"x": 100, "y": 200}),
        ({"x": [100, 200, 300, 400]}, {"x": 200, "y": 300}),
        ({"point": [[100, 200], [300, 400]]}, {"x": 200, "y": 300}),
        ({"coordinate": [10.4, 20.6]}, {"x": 10, "y": 21}),
    ],
)
def test_tools_points_and_boxes(args: dict[str, Any], expected: dict[str, int]) -> None:
    parsed = parse("tools", native(("click", args)))
    assert only(parsed) == ("click", expected)
    assert parsed.calls[0].source_id == "call_0"


def test_tools_reference_example_and_intent() -> None:
    parsed = parse(
        "tools",
        native(
            ("click", {"x": 578, "y": 172, "intent": "open the menu"}),
            ("type", {"text": "hello", "press_enter": True}),
            content="Opening the menu.",
        ),
    )
    assert [c.args["intent"] for c in parsed.calls] == ["open the menu", "Opening the menu."]
    assert parsed.calls[1].args == {
        "text": "hello",
        "press_enter": True,
        "intent": "Opening the menu.",
    }
    drag = parse(
        "tools", native(("drag_and_drop", {"start_x": 1, "start_y": 2, "end_x": 3, "end_y": 4}))
    )
    assert only(drag) == ("drag_and_drop", {"start_x": 1, "start_y": 2, "end_x": 3, "end_y": 4})


def test_tools_hotkey_as_a_string() -> None:
    assert only(parse("tools", native(("hotkey", {"keys": "ctrl+c"})))) == (
        "hotkey",
        {"keys": ["ctrl", "c"]},
    )


def test_tools_finishes_by_call_or_by_text() -> None:
    by_call = parse("tools", native(("finish", {"text": "All done."})))
    assert by_call.finished and by_call.text == "All done."
    by_text = parse("tools", text("The file is saved."))
    assert by_text.finished and by_text.text == "The file is saved."
    mixed = parse("tools", native(("click", {"x": 1, "y": 1}), ("finish", {"text": "x"})))
    assert not mixed.finished and [c.name for c in mixed.calls] == ["click"]


def test_tools_reads_tool_call_blocks_in_the_content() -> None:
    parsed = parse("tools", text(block("click", {"x": 5, "y": 6})))
    assert only(parsed) == ("click", {"x": 5, "y": 6})


@pytest.mark.parametrize(
    "message",
    [
        text(""),
        native(("click", "{not json")),
        native(("click", {"x": 1000.6, "y": 5})),
        native(("click", {"x": 5})),
        native(("launch_missiles", {})),
        text('<tool_call>{"name": "click"</tool_call>'),
        native(("type", {"text": "a", "x": 5, "y": 5})),  # a point on an action without one
    ],
)
def test_tools_unusable_replies_are_errors(message: dict[str, Any]) -> None:
    with pytest.raises(ParseError):
        parse("tools", message)


# ------------------------------------------------------------------ properties


_SIZES = {
    "tools": None,
    "qwen3-vl": (1021, 767),
    "qwen2.5-vl": (1008, 756),
    "ui-tars": (1008, 756),
    "holo": None,
    "ui-venus": None,
    "opencua": (1008, 756),
}

_numbers = st.one_of(
    st.integers(-5000, 5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
)
_points = st.one_of(
    _numbers,
    st.lists(_numbers, max_size=5),
    st.lists(st.lists(_numbers, max_size=3), max_size=3),
)
_names = st.sampled_from(
    [*GEMINI_35_DESKTOP_TABLE.names, "finish", "computer_use", "computer", "mobile_use", "x"]
)
_actions = st.sampled_from(
    [
        "left_click",
        "mouse_move",
        "left_click_drag",
        "double_click",
        "scroll",
        "hscroll",
        "key",
        "type",
        "wait",
        "terminate",
        "answer",
        "triple_click",
        "right_click",
        "zap",
    ]
)
_args = st.fixed_dictionaries(
    {},
    optional={
        "action": _actions,
        "coordinate": _points,
        "x": _points,
        "y": _numbers,
        "start_x": _numbers,
        "start_y": _numbers,
        "end_x": _numbers,
        "end_y": _numbers,
        "point": _points,
        "text": st.text(max_size=10),
        "keys": st.lists(st.text(max_size=5), max_size=3),
        "pixels": _numbers,
        "time": _numbers,
        "direction": st.sampled_from(["up", "down", "left", "right", "sideways"]),
    },
)
_ui_calls = st.builds(
    "{}(start_box='({},{})', end_box='({},{})', content='{}', key='{}', direction='{}')".format,
    st.sampled_from(
        ["click", "left_double", "drag", "scroll", "hotkey", "type", "finished", "wait", "boom"]
    ),
    _numbers,
    _numbers,
    _numbers,
    _numbers,
    st.text(max_size=8),
    st.text(max_size=8),
    st.sampled_from(["up", "down", "sideways"]),
)
_venus_calls = st.builds(
    "<think>{}</think><action>{}(point=({}, {}), start={}, content='{}', keys={})</action>".format,
    st.text(max_size=10),
    st.sampled_from(
        ["Click", "DoubleClick", "Drag", "Scroll", "Type", "Hotkey", "Finished", "Zap"]
    ),
    _numbers,
    _numbers,
    _points,
    st.text(max_size=8),
    st.lists(st.text(max_size=4), max_size=3),
)
_holo_steps = st.builds(
    lambda name, args: json.dumps({"thought": "t", "tool_call": {"tool_name": name, **args}}),
    st.sampled_from(["click", "write", "answer", "drag", "scroll", "hotkey", "wait", "zap"]),
    _args,
)
_pyautogui = st.builds(
    "## Thought:\n{}\n## Code:\n```python\npyautogui.{}(x={}, y={}, clicks={})\n```".format,
    st.text(max_size=10),
    st.sampled_from(["click", "doubleClick", "moveTo", "dragTo", "scroll", "write", "hotkey"]),
    _numbers,
    _numbers,
    _numbers,
)
_content = st.one_of(
    st.text(max_size=200),
    _venus_calls,
    _holo_steps,
    _pyautogui,
    st.builds(lambda n, a: block(n, a), _names, _args),
    st.builds(lambda t, a: f"Thought: {t}\nAction: {a}", st.text(max_size=30), _ui_calls),
    st.builds(
        lambda a, b: a + b,
        st.text(max_size=40),
        st.sampled_from(["<tool_call>", "</tool_call>", "Action:", "<|box_start|>"]),
    ),
)
_messages = st.one_of(
    st.builds(text, _content),
    st.builds(
        lambda calls, content: native(*calls, content=content),
        st.lists(st.tuples(_names, st.one_of(_args, st.text(max_size=30))), min_size=1, max_size=3),
        st.one_of(st.none(), _content),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DIALECT_NAMES), _messages)
def test_any_reply_yields_grid_actions_a_finish_or_a_parse_error(
    dialect: str, message: dict[str, Any]
) -> None:
    """Random and hostile output never yields a point outside 0-999: a reply parses into calls
    whose points are on the grid (and validate, or fail validation as an ActionError -- never an
    exception), into a finish with no calls, or into a ParseError."""
    try:
        parsed = parse(dialect, message, _SIZES[dialect])
    except ParseError:
        return
    assert parsed.finished != bool(parsed.calls)
    for call in parsed.calls:
        for key in ("x", "y", "start_x", "start_y", "end_x", "end_y"):
            if key in call.args:
                value = call.args[key]
                assert isinstance(value, int) and not isinstance(value, bool)
                assert 0 <= value <= 999
        result = GEMINI_35_DESKTOP_TABLE.validate(call.name, call.args)
        if isinstance(result, ValidatedAction):
            assert isinstance(call.args["intent"], str) and call.args["intent"]


# ------------------------------------------------------------------ holo, ui-venus, opencua


def test_holo_reads_its_flat_tool_call_on_0_1000() -> None:
    """H's documented step (hub.hcompany.ai/agent-loop): the example click (932, 880)."""
    step = {
        "note": None,
        "thought": "Continue.",
        "tool_call": {"tool_name": "click", "element": "Continue button", "x": 932, "y": 880},
    }
    name, args = only(parse("holo", text(json.dumps(step))))
    assert (name, args) == ("click", {"x": 932, "y": 880})
    fenced = parse("holo", text("```json\n" + json.dumps(step) + "\n```"))
    assert only(fenced)[1] == {"x": 932, "y": 880}
    write = {"tool_call": {"tool_name": "write", "text": "hi", "press_enter": True}}
    assert only(parse("holo", text(json.dumps(write)))) == (
        "type",
        {"text": "hi", "press_enter": True},
    )
    answer = parse("holo", text(json.dumps({"tool_call": {"tool_name": "answer", "text": "42"}})))
    assert answer.finished and answer.text == "42"


def test_holo_reads_native_tool_calls_too() -> None:
    """Holo3.1's native function calling: the same tool names as functions."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "click", "arguments": '{"x": 1000, "y": 0}'},
            }
        ],
    }
    assert only(parse("holo", message))[1] == {"x": 999, "y": 0}


@pytest.mark.parametrize(
    "content",
    [
        "no json here",
        '{"tool_call": {"tool_name": "zap"}}',
        '{"tool_call": {"tool_name": "click"}}',
    ],
)
def test_holo_refuses_what_it_cannot_read(content: str) -> None:
    with pytest.raises(ParseError):
        parse("holo", text(content))


def test_ui_venus_reads_think_and_action_on_0_999() -> None:
    """UI-Venus 2's format (ui_venus_2_processor.py): <think> then <action>Click(point=...)."""
    reply = "<think>The OK button.</think>\n<action>Click(point=(500, 250))</action>"
    parsed = parse("ui-venus", text(reply))
    assert only(parsed) == ("click", {"x": 500, "y": 250})
    assert parsed.thought == "The OK button."
    older = parse("ui-venus", text("<action>Click(box=(10, 990))</action>"))
    assert only(older)[1] == {"x": 10, "y": 990}
    drag = parse("ui-venus", text("<action>Drag(start=(1, 2), end=(3, 4))</action>"))
    assert only(drag) == ("drag_and_drop", {"start_x": 1, "start_y": 2, "end_x": 3, "end_y": 4})
    keys = parse("ui-venus", text("<action>Hotkey(keys=('ctrl', 'c'))</action>"))
    assert only(keys) == ("hotkey", {"keys": ["ctrl", "c"]})
    done = parse("ui-venus", text("<action>Finished(content='Done.')</action>"))
    assert done.finished and done.text == "Done."


@pytest.mark.parametrize(
    "content",
    ["<think>hm</think>", "<action>Click(point=(1200, 5))</action>", "<action>Zap()</action>"],
)
def test_ui_venus_refuses_what_it_cannot_read(content: str) -> None:
    with pytest.raises(ParseError):
        parse("ui-venus", text(content))


def test_opencua_reads_pyautogui_pixels_of_the_image_sent() -> None:
    """OpenCUA's ``## Code`` block, in pixels of the 1008x756 image sent for 1021x767."""
    reply = (
        "## Thought:\nThe field.\n\n## Action:\nClick the field.\n\n## Code:\n```python\n"
        "pyautogui.click(x=504, y=378)\npyautogui.write(message='hi')\n"
        "pyautogui.hotkey('ctrl', 'a')\n```"
    )
    parsed = parse("opencua", text(reply), (1008, 756))
    assert [c.name for c in parsed.calls] == ["click", "type", "hotkey"]
    assert {k: parsed.calls[0].args[k] for k in "xy"} == {"x": 500, "y": 500}
    assert parsed.thought == "The field."
    done = parse("opencua", text("## Code:\ncomputer.terminate(status='success')"), (1008, 756))
    assert done.finished


@pytest.mark.parametrize(
    "content",
    ["## Thought: nothing to do", "pyautogui.click(x=2000, y=5)", "pyautogui.zap(x=1, y=1)"],
)
def test_opencua_refuses_what_it_cannot_read(content: str) -> None:
    with pytest.raises(ParseError):
        parse("opencua", text(content), (1008, 756))


def test_a_request_for_a_person_is_not_a_finish() -> None:
    """UI-TARS ``call_user()`` (its Thought is the question) and UI-Venus ``CallUser(content)``
    ask for a person: the run waits for one, never ends ``done`` (issue 42)."""
    tars = parse("ui-tars", text("Thought: Which account should I use?\nAction: call_user()"), UI)
    assert tars.asks == "Which account should I use?" and not tars.finished and not tars.calls
    venus = parse(
        "ui-venus", text("<think>hm</think>\n<action>CallUser(content='Which?')</action>")
    )
    assert venus.asks == "Which?" and not venus.finished
    bare = parse("ui-venus", text("<think>I need a code.</think>\n<action>CallUser()</action>"))
    assert bare.asks == "I need a code."
    # next to an action, the action runs (as a finish next to calls is not acted on)
    both = parse("ui-tars", text("Action: click(start_box='(1,1)')\n\ncall_user()"), UI)
    assert both.asks is None and [c.name for c in both.calls] == ["click"]
