"""The YAML a NeMo or Megatron-Bridge recipe is written in, read without PyYAML (the core is standard-library
only): block mappings nested by indentation, ``key: value`` scalars (integers, floats, ``true``/``false``,
``null``/``~``, quoted or plain strings), ``# comments``, flow lists ``[a, b]`` and block lists of scalars
(``- item``). Anchors, tags, multi-line strings and flow mappings are refused in one line, naming the line."""

from __future__ import annotations

from commcost.core.errors import InputError

__all__ = ["loads"]


def _scalar(text: str):
    t = text.strip()
    if t in ("", "null", "Null", "NULL", "~"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        return [_scalar(x) for x in inner.split(",")] if inner else []
    for cast in (int, float):
        try:
            return cast(t)
        except ValueError:
            pass
    return t


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"":
            quote = None if quote == ch else (ch if quote is None else quote)
        elif ch == "#" and quote is None and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def loads(text: str, name: str = "YAML") -> dict:
    """The mapping of ``text`` (module docstring)."""
    root: dict = {}
    stack: list = [(-1, root)]        # (indent, container)
    pending: tuple | None = None     # (indent, parent dict, key) of a ``key:`` awaiting its block
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).rstrip()
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        if "\t" in line[:len(line) - len(line.lstrip())]:
            raise InputError(f"{name} line {n}: tab indentation is not YAML")
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if body[:1] in ("&", "*", "!", "|", ">", "{") or ": &" in body or ": *" in body or body.endswith((": |", ": >")):
            raise InputError(f"{name} line {n}: anchors, tags, block strings and flow mappings are not read "
                             f"({body[:40]!r})")
        if pending is not None:
            p_indent, parent, key = pending
            pending = None
            if indent > p_indent:
                parent[key] = [] if body.startswith("- ") or body == "-" else {}
                stack.append((indent, parent[key]))
        while stack and indent < stack[-1][0]:
            stack.pop()
        if not stack or indent != stack[-1][0] and stack[-1][0] != -1:
            raise InputError(f"{name} line {n}: indentation does not match an enclosing block")
        container = stack[-1][1]
        if stack[-1][0] == -1 and indent != 0 and not root:
            raise InputError(f"{name} line {n}: the document must start at column 0")
        if body.startswith("- ") or body == "-":
            if not isinstance(container, list):
                raise InputError(f"{name} line {n}: a list item where a mapping key was expected")
            item = body[1:].strip()
            if ":" in item and not item.startswith(("'", '"', "[")):
                container.append(None)   # a list of mappings (callbacks, plugins): not read
            else:
                container.append(_scalar(item))
            continue
        if not isinstance(container, dict):
            raise InputError(f"{name} line {n}: a mapping key inside a list")
        key, sep, value = body.partition(":")
        if not sep or (value and not value.startswith((" ", "\t"))):
            raise InputError(f"{name} line {n}: expected 'key: value', got {body[:40]!r}")
        key = key.strip().strip("'\"")
        if value.strip():
            container[key] = _scalar(value)
        else:
            container[key] = None
            pending = (indent, container, key)
    return root
