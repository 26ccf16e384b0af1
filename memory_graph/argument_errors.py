"""Argument errors a model can act on: which field, what was wrong, how to fix it.

The SDK reports pydantic's raw text ("1 validation error for create_entitiesArguments ... [type=missing,
input_value=...]"). This turns each error into one line: the field as a path (`entities[0].observations`),
what arrived, and what to send instead.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

# pydantic error type -> what to send instead
REMEDIES = {
    "missing": "add it",
    "string_type": "send a JSON string",
    "bool_type": "send the JSON boolean true or false, not a string or a number",
    "list_type": "send a JSON array",
    "dict_type": "send a JSON object",
    "model_type": "send a JSON object",
    "model_attributes_type": "send a JSON object",
    "int_type": "send a whole number",
    "int_parsing": "send a whole number",
    "float_type": "send a number",
    "float_parsing": "send a number",
    "string_too_short": "send a non-empty string",
    "string_pattern_mismatch": "send text with at least one non-space character",
    "too_short": "send at least one item",
    "extra_forbidden": "remove it: this object has no such field",
    "literal_error": "use one of the allowed values",
    "greater_than_equal": "send a larger number",
    "less_than_equal": "send a smaller number",
    "value_error": "correct the value",
}


def field_path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(arguments)"


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except ValueError:  # an integer of over 4,300 digits cannot even be printed
            text = "a number too long to show"
    return text if len(text) <= 80 else text[:77] + "..."


def explain(tool: str, error: ValidationError) -> str:
    lines = []
    for problem in error.errors(include_url=False):
        kind = problem["type"]
        message = problem["msg"].removeprefix("Value error, ")
        got = "" if kind == "missing" else f" (got {_shown(problem.get('input'))})"
        remedy = REMEDIES.get(kind, "correct it")
        lines.append(f"{field_path(tuple(problem['loc']))}: {message}{got}; {remedy}")
    count = len(lines)
    head = f"Invalid arguments for {tool} ({count} problem{'s' if count > 1 else ''}); nothing was changed:"
    return "\n".join([head, *(f"- {line}" for line in lines)])
