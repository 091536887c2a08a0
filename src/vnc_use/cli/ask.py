"""Asking the person at the terminal to allow a call the model or the policy marked for
confirmation: ``vnc-use run`` (local) and ``vnc-use run --server`` ask the same way."""

from __future__ import annotations

from typing import Any

__all__ = ["ask_approval"]


def _asker(pending: dict[str, Any]) -> str:
    """Who asks: the model, the approval policy (--confirm), or both."""
    by = pending.get("asked_by", "model")
    return {"policy": "The approval policy", "model and policy": "The model and the policy"}.get(
        by, "The model"
    )


def ask_approval(pending: dict[str, Any]) -> bool:
    """Show the call awaiting approval and ask on the terminal; False on "n" or no input."""
    who = _asker(pending)
    print(f"\n{who} asks for confirmation before {pending['name']}({pending['args']}):")
    print(f"  {pending['explanation']}")
    if pending.get("error"):
        print(f"  the call is invalid and will not run even if allowed: {pending['error']}")
    if pending.get("pixels"):
        print(f"  target pixels: {pending['pixels']}")
    while True:
        try:
            answer = input("Allow it? [y/n] ").strip().lower()
        except EOFError:
            return False
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
