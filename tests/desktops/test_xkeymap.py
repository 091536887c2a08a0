# ruff: noqa: RUF001  (Cyrillic letters that look Latin are what these tests type)
"""The planning half of :mod:`vnc_use.desktops.xkeymap` on keymaps written out here (the real
Xvnc is in ``test_text_scripts.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vnc_use.desktops.xkeymap import (
    REMOTE_NEW_KEYS,
    RemoteKeys,
    case_pair,
    plan_rounds,
    xvnc_display,
)
from vnc_use.desktops.xkeymap import (
    _xvnc_on_port as xvnc_on_port,
)

U = 0x01000000
A_KEY = (ord("a"), ord("A"))


def test_case_pairs_hold_a_letter_and_its_capital() -> None:
    assert case_pair(U + ord("Ф")) == (U + ord("ф"), U + ord("Ф"))
    assert case_pair(U + ord("ф")) == (U + ord("ф"), U + ord("Ф"))
    assert case_pair(ord("é")) == (ord("é"), ord("É"))
    assert case_pair(U + ord("日")) == (U + ord("日"), U + ord("日"))
    assert case_pair(ord("ß")) == (ord("ß"), ord("ß"))  # its capital is two letters


def test_rounds_fit_the_spare_keycodes_and_keep_what_is_mapped() -> None:
    """Three spare keycodes, one holding ж already: a text of six new letters goes in two
    rounds; ж keeps its keycode; a capital is typed with Shift; ASCII needs none."""
    mapping = {
        10: (*A_KEY, 0, 0),
        11: (0, 0, 0, 0),
        12: (U + ord("ж"), U + ord("Ж"), 0, 0),
        13: (0,),
        14: (0xB1, 0xB1),  # the keypad's plusminus: a key of the map, not spare
    }
    rounds = plan_rounds("abc Жук пёс", mapping)
    assert "".join(r.text for r in rounds) == "abc Жук пёс"
    assert [sorted(r.assign) for r in rounds] == [[11, 13], [11, 12, 13]]
    first = rounds[0]
    assert first.assign == {11: (U + ord("у"), U + ord("У")), 13: (U + ord("к"), U + ord("К"))}
    assert U + ord("Ж") in first.shifted
    assert plan_rounds("plain ASCII", mapping)[0].assign == {}


def test_a_keymap_without_spare_keycodes_refuses_naming_the_characters() -> None:
    with pytest.raises(ValueError, match=r"cannot type 'ж' 'ё' on this desktop"):
        plan_rounds("a ж ё", {10: (*A_KEY,), 11: (ord(" "), ord(" "))})


def test_an_unseen_keymap_takes_19_new_characters_per_connection() -> None:
    keys = RemoteKeys()
    keys.take("Grüße, café")  # ü ß é: 3
    keys.take("GRÜSSE")  # Ü is ü's pair: nothing new
    assert len(keys.typed) == 3
    letters = "абвгдежзийклмнопрс"  # 18 new: one too many
    with pytest.raises(ValueError) as refused:
        keys.take(letters)
    line = str(refused.value)
    assert "cannot type 'р' 'с' on this VNC server" in line and "\n" not in line
    assert f"about {REMOTE_NEW_KEYS} spare keys" in line and "nothing was typed" in line
    assert len(keys.typed) == 3  # a refused text counts nothing
    keys.take(letters[:16])
    assert len(keys.typed) == REMOTE_NEW_KEYS


def test_wayvnc_takes_nothing_beyond_ascii() -> None:
    keys = RemoteKeys.for_server(b"WayVNC")
    keys.take("plain ASCII")
    with pytest.raises(ValueError, match=r"cannot type 'é' on this VNC server: wayvnc types only"):
        keys.take("café")
    assert RemoteKeys.for_server(b"host:1 (user)").limit == REMOTE_NEW_KEYS


@pytest.mark.parametrize(
    ("argv", "port", "display"),
    [
        (["/usr/bin/Xvnc", ":7", "-rfbport", "5999"], 5999, ":7"),
        (["Xvnc", ":7", "-rfbport=5999"], 5999, ":7"),
        (["/usr/bin/Xvnc", ":3"], 5903, ":3"),
        (["/usr/bin/Xvnc", ":3"], 5904, None),
        (["/usr/bin/x11vnc", "-display", ":3", "-rfbport", "5900"], 5900, None),
    ],
)
def test_the_xvnc_behind_a_port_is_known_by_its_command_line(
    argv: list[str], port: int, display: str | None
) -> None:
    assert xvnc_on_port(argv, port) == display


def test_no_proc_folder_means_no_xvnc_found(tmp_path: Path) -> None:
    assert xvnc_display("127.0.0.1", 5901, proc=tmp_path / "missing") is None
    assert xvnc_display("10.0.0.5", 5901) is None  # another machine: never looked up
