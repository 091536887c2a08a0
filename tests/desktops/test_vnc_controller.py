"""VNCController against a real TigerVNC desktop, checked by what the probe app received."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageChops

from vnc_use.desktops.png import encode_png
from vnc_use.desktops.vnc import (
    PIXELS_PER_NOTCH,
    VNCController,
    parse_server,
    to_vnc_keys,
)
from vnc_use.errors import ConfigError, VncAuthError, VncConnectionError, VncTimeoutError
from vnc_use.testing.desktop import TestDesktop

from desktop_fixtures import Probe

CONTROL, SHIFT, ALT = 0x4, 0x1, 0x8

# --------------------------------------------------------------------------- pure functions


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("localhost::5901", ("localhost", 5901)),
        ("localhost:1", ("localhost", 5901)),
        ("vnc.example.com", ("vnc.example.com", 5900)),
        ("127.0.0.1::5900", ("127.0.0.1", 5900)),
        ("10.0.0.2:0", ("10.0.0.2", 5900)),
        ("[::1]::5905", ("::1", 5905)),
        ("[::1]:3", ("::1", 5903)),
        ("[::1]", ("::1", 5900)),
        ("  host::6000 ", ("host", 6000)),
    ],
)
def test_parse_server_accepts(server: str, expected: tuple[str, int]) -> None:
    assert parse_server(server) == expected


@pytest.mark.parametrize(
    "server",
    [
        "",
        "   ",
        "host:abc",
        "host::",
        "host:::5",
        "[::1",
        "[zz]::1",
        "host::70000",
        "a b",
        "host:-1",
        "host::5900x",
        ":5900",
        "http://host",
        "[::1]x",
    ],
)
def test_parse_server_rejects_garbage(server: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_server(server)
    message = str(info.value)
    assert "\n" not in message
    assert "host::port" in message


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("control+a", ["ctrl", "a"]),
        ("Ctrl+C", ["ctrl", "c"]),
        ("CONTROL+SHIFT+t", ["ctrl", "shift", "T"]),
        ("shift+a", ["shift", "A"]),
        ("alt+F4", ["alt", "f4"]),
        ("meta+x", ["super", "x"]),
        ("super", ["super"]),
        ("command+q", ["super", "q"]),
        ("cmd+q", ["super", "q"]),
        ("win", ["super"]),
        ("Enter", ["enter"]),
        ("return", ["enter"]),
        ("Escape", ["esc"]),
        ("esc", ["esc"]),
        ("Tab", ["tab"]),
        ("shift+Tab", ["shift", "tab"]),
        ("BackSpace", ["bsp"]),
        ("Delete", ["del"]),
        ("del", ["del"]),
        ("space", ["space"]),
        ("Up", ["up"]),
        ("ArrowDown", ["down"]),
        ("arrowleft", ["left"]),
        ("RIGHT", ["right"]),
        ("PageUp", ["pgup"]),
        ("page_down", ["pgdn"]),
        ("Page_Up", ["pgup"]),
        ("Home", ["home"]),
        ("end", ["end"]),
        ("Insert", ["ins"]),
        *[(f"F{n}", [f"f{n}"]) for n in range(1, 13)],
        ("-", ["minus"]),
        ("ctrl+-", ["ctrl", "minus"]),
        ("control++", ["ctrl", "+"]),
        ("+", ["+"]),
        ("A", ["A"]),
        ("Control+A", ["ctrl", "a"]),
        ("7", ["7"]),
        ("é", ["é"]),
    ],
)
def test_to_vnc_keys(keys: str, expected: list[str]) -> None:
    assert to_vnc_keys(keys) == expected


@pytest.mark.parametrize("keys", ["control+banana", "hyperspace", "", "control+", "++a", "f13"])
def test_to_vnc_keys_rejects_unknown(keys: str) -> None:
    with pytest.raises(ValueError) as info:
        to_vnc_keys(keys)
    if "banana" in keys:
        assert "banana" in str(info.value)


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (64, 17), (301, 200)])
def test_encode_png_is_lossless(size: tuple[int, int]) -> None:
    image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    decoded = Image.open(io.BytesIO(encode_png(image)))
    assert decoded.format == "PNG" and decoded.mode == "RGB" and decoded.size == size
    assert decoded.tobytes() == image.tobytes()
    grey = Image.new("L", (5, 4), 77)
    assert Image.open(io.BytesIO(encode_png(grey))).getpixel((2, 2)) == (77, 77, 77)


def test_calls_before_connect_raise_connection_error() -> None:
    controller = VNCController()
    assert not controller.is_connected()
    with pytest.raises(VncConnectionError):
        controller.click(1, 1)
    with pytest.raises(VncConnectionError):
        controller.screenshot_png()
    controller.disconnect()  # harmless


# --------------------------------------------------------------------------- pointer


def _assert_click(probe: Probe, vnc: VNCController, x: int, y: int, button: int = 1) -> None:
    probe.log.clear()
    vnc.click(x, y, button=button)
    press = probe.log.wait_type("press", button=button)
    release = probe.log.wait_type("release", button=button)
    assert (press["x"], press["y"]) == (x, y)
    assert (release["x"], release["y"]) == (x, y)


@pytest.mark.desktop
def test_clicks_land_on_corners_and_centre(probe: Probe, vnc: VNCController) -> None:
    width, height = probe.size
    assert vnc.screen_size() == (width, height) == (1440, 900)
    for x, y in [(0, 0), (width - 1, 0), (0, height - 1), (width - 1, height - 1)]:
        _assert_click(probe, vnc, x, y)
    _assert_click(probe, vnc, width // 2, height // 2)


@pytest.mark.desktop
def test_clicks_land_on_corners_of_small_desktop(
    small_probe: Probe, small_vnc: VNCController
) -> None:
    width, height = small_probe.size
    assert small_vnc.screen_size() == (width, height) == (1024, 768)
    for x, y in [(0, 0), (width - 1, 0), (0, height - 1), (width - 1, height - 1), (517, 301)]:
        _assert_click(small_probe, small_vnc, x, y)


@pytest.mark.desktop
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_click_lands_where_sent_property(
    probe: Probe, vnc: VNCController, data: st.DataObject
) -> None:
    width, height = probe.size
    x = data.draw(st.integers(0, width - 1), label="x")
    y = data.draw(st.integers(0, height - 1), label="y")
    _assert_click(probe, vnc, x, y)


@pytest.mark.desktop
def test_right_and_middle_click(probe: Probe, vnc: VNCController) -> None:
    _assert_click(probe, vnc, 700, 500, button=3)
    _assert_click(probe, vnc, 20, 880, button=2)


@pytest.mark.desktop
def test_double_and_triple_click(probe: Probe, vnc: VNCController) -> None:
    vnc.double_click(333, 444)
    double = probe.log.wait_type("double")
    assert (double["x"], double["y"], double["button"]) == (333, 444, 1)
    probe.log.wait_for(lambda e: len(probe.log.events("release")) == 2, what="2 releases")
    assert len(probe.log.events("press")) == 2
    probe.log.clear()
    vnc.triple_click(900, 600)
    triple = probe.log.wait_type("triple")
    assert (triple["x"], triple["y"]) == (900, 600)
    probe.log.wait_for(lambda e: len(probe.log.events("release")) == 3, what="3 releases")


@pytest.mark.desktop
def test_drag_presses_at_start_and_releases_at_end(probe: Probe, vnc: VNCController) -> None:
    vnc.drag_and_drop(100, 700, 1300, 250, steps=12)
    release = probe.log.wait_type("release", button=1)
    press = probe.log.events("press")[0]
    assert (press["x"], press["y"]) == (100, 700)
    assert (release["x"], release["y"]) == (1300, 250)
    held = [e for e in probe.log.events("motion") if e["buttons"] & 1]
    assert held, "no motion with the button held"
    assert (held[-1]["x"], held[-1]["y"]) == (1300, 250)


@pytest.mark.desktop
def test_mouse_down_move_up(probe: Probe, vnc: VNCController) -> None:
    vnc.move(123, 45)
    probe.log.wait_type("motion", x=123, y=45, buttons=0)
    vnc.mouse_down(200, 210)
    probe.log.wait_type("press", x=200, y=210, button=1)
    vnc.mouse_up(260, 230)
    probe.log.wait_type("release", x=260, y=230, button=1)


@pytest.mark.desktop
@pytest.mark.parametrize(
    ("direction", "button"), [("up", 4), ("down", 5), ("left", 6), ("right", 7)]
)
def test_scroll_at_turns_the_wheel_at_a_point(
    probe: Probe, vnc: VNCController, direction: str, button: int
) -> None:
    vnc.scroll_at(640, 480, direction, magnitude=3 * PIXELS_PER_NOTCH)
    probe.log.wait_for(lambda e: len(probe.log.events("wheel")) >= 3, what="3 wheel notches")
    wheels = probe.log.events("wheel")
    assert [(e["x"], e["y"], e["button"]) for e in wheels] == [(640, 480, button)] * 3


@pytest.mark.desktop
def test_scroll_at_sends_at_least_one_notch(probe: Probe, vnc: VNCController) -> None:
    vnc.scroll_at(10, 10, "down", magnitude=1)
    assert probe.log.wait_type("wheel")["button"] == 5


@pytest.mark.desktop
@pytest.mark.parametrize(
    ("direction", "magnitude", "keysym", "count"),
    [
        ("down", 800, "Next", 2),
        ("up", 400, "Prior", 1),
        ("left", 100, "Left", 1),
        ("right", 1200, "Right", 3),
    ],
)
def test_scroll_pages_the_document(
    probe: Probe, vnc: VNCController, direction: str, magnitude: int, keysym: str, count: int
) -> None:
    vnc.scroll(direction, magnitude)
    probe.log.wait_for(lambda e: len(probe.log.events("keyup")) >= count, what="key releases")
    assert [e["keysym"] for e in probe.log.events("key")] == [keysym] * count


@pytest.mark.desktop
def test_bad_arguments_raise_value_error(vnc: VNCController) -> None:
    width, height = vnc.screen_size()
    for x, y in [(-1, 0), (0, -1), (width, 0), (0, height)]:
        with pytest.raises(ValueError, match="outside"):
            vnc.click(x, y)
    with pytest.raises(ValueError):
        vnc.drag_and_drop(0, 0, width, 10)
    with pytest.raises(ValueError, match="direction"):
        vnc.scroll_at(5, 5, "sideways")
    with pytest.raises(ValueError, match="direction"):
        vnc.scroll("diagonal")
    with pytest.raises(ValueError):
        vnc.click(5, 5, button=0)
    with pytest.raises(ValueError, match="banana"):
        vnc.key_combo("control+banana")
    with pytest.raises(ValueError):
        vnc.key_down("control+a")
    assert vnc.is_connected()  # bad input never costs the connection


# --------------------------------------------------------------------------- keyboard


def _type_and_expect(probe: Probe, vnc: VNCController, text: str, **kwargs: bool) -> None:
    vnc.type_text(text, clear_first=True, **kwargs)
    probe.log.wait_type("text", text=text)


@pytest.mark.desktop
@pytest.mark.parametrize(
    ("combo", "keysym", "state"),
    [
        ("Enter", "Return", 0),
        ("return", "Return", 0),
        ("Escape", "Escape", 0),
        ("esc", "Escape", 0),
        ("Tab", "Tab", 0),
        ("shift+Tab", "ISO_Left_Tab", SHIFT),
        ("BackSpace", "BackSpace", 0),
        ("Delete", "Delete", 0),
        ("space", "space", 0),
        ("Up", "Up", 0),
        ("ArrowDown", "Down", 0),
        ("left", "Left", 0),
        ("right", "Right", 0),
        ("PageUp", "Prior", 0),
        ("page_down", "Next", 0),
        ("Home", "Home", 0),
        ("End", "End", 0),
        ("Insert", "Insert", 0),
        *[(f"F{n}", f"F{n}", 0) for n in range(1, 13)],
        ("-", "minus", 0),
        ("+", "plus", SHIFT),
        ("ctrl+-", "minus", CONTROL),
        ("control++", "plus", CONTROL | SHIFT),
        ("control+a", "a", CONTROL),
        ("alt+x", "x", ALT),
        ("shift+a", "A", SHIFT),
        ("Z", "Z", None),
    ],
)
def test_key_combo_families(
    probe: Probe, vnc: VNCController, combo: str, keysym: str, state: int | None
) -> None:
    vnc.key_combo(combo)
    event = probe.log.wait_type("key", keysym=keysym)
    if state is not None:
        assert event["state"] & (CONTROL | SHIFT | ALT) == state
    # modifiers are released in reverse order: nothing stays held down
    probe.log.wait_for(
        lambda e: len(probe.log.events("keyup")) >= len(probe.log.events("key")), what="releases"
    )


@pytest.mark.desktop
def test_meta_combo_presses_super(probe: Probe, vnc: VNCController) -> None:
    vnc.key_combo("meta+x")
    probe.log.wait_type("key", keysym="Super_L")
    probe.log.wait_type("key", keysym="x")
    probe.log.wait_type("keyup", keysym="Super_L")


@pytest.mark.desktop
def test_key_down_and_up(probe: Probe, vnc: VNCController) -> None:
    vnc.key_down("shift")
    probe.log.wait_type("key", keysym="Shift_L")
    assert not probe.log.events("keyup")
    vnc.key_up("shift")
    probe.log.wait_type("keyup", keysym="Shift_L")


@pytest.mark.desktop
def test_types_symbols_upper_case_digits_and_spaces_exactly(
    probe: Probe, vnc: VNCController
) -> None:
    _type_and_expect(probe, vnc, "!@#$%^&*()_+-=[]{};':\",./<>?\\|")
    _type_and_expect(probe, vnc, "Hello World ABC xyz 0123456789 !@#$%^&*()_+-=[]{};':\",./<>?\\|")
    _type_and_expect(probe, vnc, "  leading and trailing spaces  ")


@pytest.mark.desktop
def test_types_latin1_and_beyond(probe: Probe, vnc: VNCController) -> None:
    _type_and_expect(probe, vnc, "café")
    _type_and_expect(probe, vnc, "Ünïcödé → ok")


@pytest.mark.desktop
def test_control_a_selects_all_in_the_entry(probe: Probe, vnc: VNCController) -> None:
    _type_and_expect(probe, vnc, "select me")
    vnc.key_combo("control+a")
    vnc.type_text("X")
    probe.log.wait_type("text", text="X")


@pytest.mark.desktop
def test_clear_first_clears_and_press_enter_submits(probe: Probe, vnc: VNCController) -> None:
    vnc.type_text("old text that must go")
    probe.log.wait_for(lambda e: e.get("text", "").endswith("must go"), what="old text")
    vnc.type_text("new", clear_first=True, press_enter=True)
    submit = probe.log.wait_type("submit")
    assert submit["text"] == "new"


@pytest.mark.desktop
def test_first_press_since_finds_the_click_before_a_long_text(
    probe: Probe, vnc: VNCController
) -> None:
    """Where the report's video shows an action (issue 38): its first press, the click, even
    after a text of a hundred keys; None before any press; moves are not presses."""
    since = time.time()
    vnc.move(*probe.canvas_point())
    assert vnc.first_press_since(since) is None
    vnc.click(*probe.entry_center)
    clicked = time.time()
    vnc.type_text("x" * 100)
    probe.log.wait_for(lambda e: e.get("text", "").endswith("x" * 100), what="the text")
    first = vnc.first_press_since(since)
    assert first is not None and since <= first <= clicked
    press = probe.log.wait_type("press")  # the probe got it after it was sent
    assert first <= press["t"]
    later = vnc.first_press_since(clicked)  # the first key of the text
    assert later is not None and first < later <= time.time()


# --------------------------------------------------------------------------- screen


def _png_image(data: bytes) -> Image.Image:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    image.load()
    return image


@pytest.mark.desktop
def test_screenshot_png_has_the_real_size(probe: Probe, vnc: VNCController) -> None:
    image = _png_image(vnc.screenshot_png())
    assert image.size == (1440, 900)
    assert image.mode == "RGB"
    frame = vnc.screenshot()
    assert frame.size == (1440, 900) and frame.mode == "RGB"
    # nothing moves on the idle probe but the entry's blinking cursor: outside the entry the
    # PNG holds exactly the frame's pixels
    shot = _png_image(vnc.screenshot_png())
    x, y, w, h = probe.ready["entry"]
    entry = (x, y, x + w, y + h)
    shot.paste(frame.crop(entry), entry[:2])
    assert shot.tobytes() == frame.tobytes()


@pytest.mark.desktop
def test_screenshot_png_has_the_real_size_small(
    small_probe: Probe, small_vnc: VNCController
) -> None:
    image = _png_image(small_vnc.screenshot_png())
    assert image.size == (1024, 768)


@pytest.mark.desktop
def test_screenshot_shows_a_change(probe: Probe, vnc: VNCController) -> None:
    before = _png_image(vnc.screenshot_png()).convert("RGB")
    x, y = probe.canvas_point()
    vnc.click(x, y)
    probe.log.wait_type("press", x=x, y=y)
    deadline = time.monotonic() + 5.0
    after = before
    while time.monotonic() < deadline:
        after = _png_image(vnc.screenshot_png()).convert("RGB")
        if after.getpixel((x, y)) != before.getpixel((x, y)):
            break
    assert ImageChops.difference(before, after).getbbox() is not None
    assert after.getpixel((x, y)) != before.getpixel((x, y)), "no marker where we clicked"


@pytest.mark.desktop
def test_calls_from_many_threads_are_serialised(probe: Probe, vnc: VNCController) -> None:
    errors: list[BaseException] = []
    sizes: list[tuple[int, int]] = []

    def shoot() -> None:
        try:
            for _ in range(4):
                sizes.append(_png_image(vnc.screenshot_png()).size)
        except BaseException as exc:
            errors.append(exc)

    points = [(50 + 90 * i, 300 + 20 * i) for i in range(12)]

    def click() -> None:
        try:
            for x, y in points:
                vnc.click(x, y)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=shoot) for _ in range(3)] + [threading.Thread(target=click)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert sizes == [(1440, 900)] * 12
    probe.log.wait_for(lambda e: len(probe.log.events("release")) == 12, what="12 releases")
    assert [(e["x"], e["y"]) for e in probe.log.events("press")] == points


# --------------------------------------------------------------------------- failures


@pytest.fixture
def spare_desktop() -> Iterator[TestDesktop]:
    """A small desktop of its own (for auth failures and for killing it)."""
    with TestDesktop(640, 480) as desk:
        yield desk


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for conn in accepted:
        conn.close()
    listener.close()


@pytest.mark.desktop
def test_wrong_password_raises_auth_error(spare_desktop: TestDesktop) -> None:
    with pytest.raises(VncAuthError) as info:
        VNCController().connect(spare_desktop.server, "wrong-pw")
    assert f"127.0.0.1 port {spare_desktop.port}" in str(info.value)
    with pytest.raises(VncAuthError, match=r"VNC_PASSWORD.*--vnc-password"):
        VNCController().connect(spare_desktop.server, None)
    # the right password still works afterwards
    with VNCController().connect(spare_desktop.server, spare_desktop.password) as vnc:
        assert vnc.screen_size() == (640, 480)


def test_closed_port_raises_connection_error() -> None:
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(VncConnectionError, match="refused"):
        VNCController(connect_timeout=5).connect(f"127.0.0.1::{port}", "x")
    assert time.monotonic() - started < 10


def test_silent_server_raises_timeout_error(silent_server: int) -> None:
    started = time.monotonic()
    with pytest.raises(VncTimeoutError, match="no VNC greeting within 1 s") as info:
        VNCController(connect_timeout=1.0).connect(f"127.0.0.1::{silent_server}", "x")
    assert f"127.0.0.1 port {silent_server}" in str(info.value)
    assert time.monotonic() - started < 10  # a hang guard, not a performance check


def test_non_vnc_server_raises_connection_error() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            with contextlib.suppress(OSError):  # the client hangs up: that is the point
                conn.recv(100)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(VncConnectionError):
            VNCController(connect_timeout=5).connect(f"127.0.0.1::{listener.getsockname()[1]}")
    finally:
        thread.join(timeout=5)
        listener.close()


@pytest.mark.desktop
def test_lost_connection_raises_connection_error(spare_desktop: TestDesktop) -> None:
    vnc = VNCController(timeout=5).connect(spare_desktop.server, spare_desktop.password)
    assert vnc.is_connected()
    spare_desktop.stop()
    deadline = time.monotonic() + 5
    while vnc.is_connected() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not vnc.is_connected()
    with pytest.raises(VncConnectionError, match="lost") as info:
        vnc.click(1, 1)
    assert f"127.0.0.1 port {spare_desktop.port}" in str(info.value)
    with pytest.raises(VncConnectionError):
        vnc.screenshot_png()
    vnc.disconnect()


@pytest.mark.desktop
def test_unresponsive_server_times_out_and_marks_disconnected(spare_desktop: TestDesktop) -> None:
    vnc = VNCController(timeout=1.0).connect(spare_desktop.server, spare_desktop.password)
    pid = spare_desktop.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # our own Xvnc: it keeps the socket but stops answering
    try:
        started = time.monotonic()
        with pytest.raises(VncTimeoutError, match="did not answer"):
            vnc.screenshot_png()
        assert time.monotonic() - started < 10
        assert not vnc.is_connected()
        with pytest.raises(VncConnectionError):
            vnc.click(1, 1)
    finally:
        os.kill(pid, signal.SIGCONT)
    vnc.disconnect()


@pytest.mark.desktop
def test_context_manager_disconnects(desktop: TestDesktop) -> None:
    with VNCController().connect(desktop.server, desktop.password) as vnc:
        assert vnc.is_connected()
    assert not vnc.is_connected()
    # reconnecting the same object works
    vnc.connect(desktop.server, desktop.password)
    assert vnc.is_connected()
    vnc.disconnect()
    vnc.disconnect()
