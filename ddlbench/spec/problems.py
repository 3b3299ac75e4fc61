"""Turn pydantic validation errors into one readable :class:`Problem` each."""

from __future__ import annotations

import re
import typing
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from ddlbench.errors import Problem, did_you_mean
from ddlbench.spec.yamlsource import Loc, YamlSource

_TYPE_NAMES = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "string": "a string",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
}


def _model_names() -> set:
    """Names of every pydantic model class: pydantic tags a union's model member with it."""
    names, todo = set(), [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            names.add(sub.__name__)
            todo.append(sub)
    return names


def _clean_loc(loc: Iterable[Any]) -> Loc:
    """Drop pydantic's union/validator tags (``'list[int]'``, ``'function-after[...]'``,
    a model's class name)."""
    out = []
    models = _model_names()
    for part in loc:
        if isinstance(part, str) and (
            "[" in part or part in _TYPE_NAMES or part.startswith("function-") or part in models
        ):
            continue
        out.append(part)
    return tuple(out)


def _fields_at(model: Type[BaseModel], loc: Loc) -> List[str]:
    """Field names of the model that sits at ``loc`` below ``model`` (for 'did you mean')."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return []
            current = field.annotation
        elif typing.get_origin(current) in (list, List) and isinstance(part, int):
            current = typing.get_args(current)[0]
        elif typing.get_origin(current) in (dict, typing.Dict) and isinstance(part, str):
            current = typing.get_args(current)[1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(tp: Any) -> Any:
    """Optional[X] -> X; Union[int, List[int]] -> the first model-ish member."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        for a in args:
            if isinstance(a, type) and issubclass(a, BaseModel):
                return a
        for a in args:
            if typing.get_origin(a) in (list, List, dict, typing.Dict):
                return a
        return args[0] if args else tp
    return tp


_QUOTED = re.compile(r"'([^']*)'")


class KeyedError(ValueError):
    """A model validator's error about one of the model's keys: raised with the key's path
    below the model (``KeyedError("...", "target_accuracy")``), it is reported at that key's
    line instead of the model's first key."""

    def __init__(self, message: str, *loc: Any) -> None:
        super().__init__(message)
        self.loc: Loc = tuple(loc)


def keyed_errors(found: Sequence[Tuple[Loc, str]], value: Any = None) -> ValidationError:
    """Every problem one validator found, each at its own key below the validated value
    (``[((2,), "..."), (("zip", 1), "...")]``): raised from a validator, pydantic reports them
    all, each at its own location, where a :class:`KeyedError` stops at the first."""
    details = [
        InitErrorDetails(
            type=PydanticCustomError("value_error", "{message}", {"message": message}),
            loc=tuple(loc),
            input=value,
        )
        for loc, message in found
    ]
    return ValidationError.from_exception_data("ddlbench", details)


def check_sweep_values(value: Any, least: int, what: str) -> None:
    """One value or a list of them (a sweep axis: batch sizes, sequence lengths, node counts):
    each at least ``least`` and none repeated. A list's problems are each reported at its own
    item (``batch_size[1]``, that item's line), all at once; a single value's at its key."""
    if not isinstance(value, list):
        if value < least:
            raise ValueError(f"{what} must be at least {least} (got {value})")
        return
    if not value:
        raise ValueError(f"list at least one {what[:-1] if what.endswith('s') else what}")
    found: List[Tuple[Loc, str]] = []
    first: Dict[Any, int] = {}
    for i, v in enumerate(value):
        if v < least:
            found.append(((i,), f"{what} must be at least {least} (got {v})"))
        elif v in first:
            found.append(((i,), f"{what} must not repeat: {v} is also item {first[v]}"))
        first.setdefault(v, i)
    if found:
        raise keyed_errors(found, value)


def _keyed_loc(err: dict) -> Loc:
    """The key a :class:`KeyedError` names (empty for any other error)."""
    error = (err.get("ctx") or {}).get("error")
    return tuple(getattr(error, "loc", ())) if isinstance(error, KeyedError) else ()


def shown(given: Any) -> str:
    """A value as the YAML it came from was likely spelt: a boolean as ``true`` or ``false``
    (which ``yes``/``on``, ``no``/``off`` also read as), ``null``; anything else as Python's
    repr (``'1'`` for a quoted string, ``128.5``)."""
    if isinstance(given, bool):
        word, also = ("true", "yes and on") if given else ("false", "no and off")
        return f"{word}, a boolean (YAML reads {also} as {word} too)"
    if given is None:
        return "null (no value)"
    return repr(given)


def _message(err: dict, loc: Loc, model: Optional[Type[BaseModel]]) -> str:
    kind = err.get("type", "")
    given = err.get("input")
    if kind == "extra_forbidden":
        key = loc[-1] if loc else "?"
        allowed = _fields_at(model, loc[:-1]) if model else []
        hint = did_you_mean(str(key), allowed)
        if not hint and allowed:
            hint = f" (allowed: {', '.join(allowed)})"
        return f"unknown key '{key}'{hint}"
    if kind == "missing":
        return "required key is missing"
    if kind in ("literal_error", "enum"):
        choices = _QUOTED.findall(err.get("ctx", {}).get("expected", ""))
        return f"{given!r} is not one of {', '.join(choices)}{did_you_mean(given, choices)}"
    bounds = {
        "greater_than_equal": ("ge", "at least"),
        "greater_than": ("gt", "greater than"),
        "less_than_equal": ("le", "at most"),
        "less_than": ("lt", "less than"),
    }
    if kind in bounds:
        key, words = bounds[kind]
        return f"must be {words} {err.get('ctx', {}).get(key)}, got {shown(given)}"
    if kind == "int_from_float":  # a model validated lax (in code): the same wording
        return f"expected an integer, got {shown(given)}"
    if kind == "value_error":
        msg = str(err.get("msg", ""))
        return msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg
    if kind.endswith("_type") or kind.endswith("_parsing"):
        base = kind.split("_")[0]
        wanted = _TYPE_NAMES.get(base, base)
        if kind == "model_type" or kind == "dict_type":
            wanted = "a mapping"
        return f"expected {wanted}, got {shown(given)}"
    msg = str(err.get("msg", kind))
    return f"{msg} (got {given!r})" if given is not None and not isinstance(given, dict) else msg


def problems_from(
    exc: ValidationError,
    source: Optional[YamlSource],
    model: Optional[Type[BaseModel]] = None,
    prefix: Loc = (),
) -> List[Problem]:
    """One problem per distinct location, in file order."""
    seen: dict = {}
    for err in exc.errors(include_url=False):
        loc = prefix + _clean_loc(err.get("loc", ())) + _keyed_loc(err)
        if err.get("type") == "union_tag_invalid":
            continue
        msg = _message(err, loc[len(prefix) :], model)
        # a union reports once per member: keep the first, most specific message; rules
        # (keyed_errors) that fail at one key are each said
        if loc in seen and "message" not in (err.get("ctx") or {}):
            continue
        seen.setdefault(loc, [])
        if msg not in seen[loc]:
            seen[loc].append(msg)
    # a deeper error explains a shallower one (a union member's type error): keep the deeper
    locs = list(seen)
    for loc in locs:
        if any(len(other) > len(loc) and other[: len(loc)] == loc for other in locs):
            seen.pop(loc, None)
    found = [(loc, msg) for loc, messages in seen.items() for msg in messages]
    out: List[Problem] = []
    for loc, msg in found:
        if source is not None:
            out.append(source.problem(loc, msg))
        else:
            from ddlbench.spec.yamlsource import format_loc

            out.append(Problem(msg, where=format_loc(loc)))
    out.sort(key=lambda p: (p.line or 0, p.col or 0))
    return out


def position_key(problem: Problem) -> Tuple[int, int]:
    return (problem.line or 0, problem.col or 0)
