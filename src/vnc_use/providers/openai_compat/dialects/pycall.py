"""Python-style calls as some families write their actions: ``Click(point=(120, 45))``,
``pyautogui.click(x=640, y=400)``.

Read with :mod:`ast` (never evaluated): the callee is a name or a dotted name, every argument
a Python literal (numbers, strings, tuples, lists). Anything else is a :class:`~.base.ParseError`
whose message is written for the model.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from vnc_use.providers.openai_compat.dialects.base import ParseError

__all__ = ["PyCall", "parse_call"]


@dataclass(frozen=True)
class PyCall:
    """One call: ``name`` (dotted, as written), positional ``args`` and keyword ``kwargs``."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, position: int | None = None, default: Any = None) -> Any:
        """A keyword argument, else the positional one at ``position``, else ``default``."""
        if key in self.kwargs:
            return self.kwargs[key]
        if position is not None and position < len(self.args):
            return self.args[position]
        return default


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise ParseError("An action must be a function call such as Click(point=(x, y)).")


def _literal(node: ast.expr, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        raise ParseError(f"An argument of {where} is not a plain value.") from None


def parse_call(text: str) -> PyCall:
    """The single call written in ``text`` (surrounding whitespace ignored)."""
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        raise ParseError(
            f"Cannot read the action {source[:60]!r}: write Name(key=value)."
        ) from None
    call = tree.body
    if not isinstance(call, ast.Call):
        raise ParseError(f"{source[:60]!r} is not an action call: write Name(key=value).")
    name = _dotted(call.func)
    args = tuple(_literal(a, name) for a in call.args)
    kwargs = {k.arg: _literal(k.value, name) for k in call.keywords if k.arg is not None}
    return PyCall(name, args, kwargs)
