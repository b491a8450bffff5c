"""Command-line tools over the public runtime API, and the MindSpore flag syntax they share.

MindSpore Lite's tools take flags as `--name=value` only; a boolean flag may also be given bare (`--help`,
`--timeProfiling`). Unknown flags and malformed values are `UsageError`s (RET_INPUT_PARAM_INVALID).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Sequence

from lite.status import RET_INPUT_PARAM_INVALID, LiteError

__all__ = ["Flag", "UsageError", "parse_flags", "usage"]

_TRUE, _FALSE = ("true", "1", "on"), ("false", "0", "off")


class UsageError(LiteError):
    """A malformed command line: unknown flag, missing value, value out of its choices."""
    status = RET_INPUT_PARAM_INVALID


@dataclass(frozen=True)
class Flag:
    """One `--name=value` flag. `kind` (str, int, float or bool) converts the text, `choices` restricts it,
    `default` stands when the flag is absent (None: absent)."""
    name: str
    help: str
    kind: type = str
    default: Any = None
    choices: tuple[str, ...] = ()


HELP = Flag("help", "print this message", bool, False)


def _convert(flag: Flag, text: str) -> Any:
    if flag.choices and text not in flag.choices:
        raise UsageError(f"--{flag.name}={text}: the value must be one of {'|'.join(flag.choices)}")
    if flag.kind is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise UsageError(f"--{flag.name}={text}: the value must be true or false")
    try:
        return flag.kind(text)
    except ValueError:
        raise UsageError(f"--{flag.name}={text}: the value must be {flag.kind.__name__}") from None


def parse_flags(argv: Sequence[str], flags: Sequence[Flag]) -> SimpleNamespace:
    """The value of every flag (plus `help`) by name: the converted command-line text, or the default."""
    known = {f.name: f for f in (*flags, HELP)}
    values = {name: f.default for name, f in known.items()}
    for arg in argv:
        if not arg.startswith("--"):
            raise UsageError(f"unexpected argument '{arg}': flags have the form --name=value")
        name, has_value, text = arg[2:].partition("=")
        flag = known.get(name)
        if flag is None:
            raise UsageError(f"unknown flag '--{name}'")
        if not has_value and flag.kind is not bool:
            raise UsageError(f"flag '--{name}' needs a value: --{name}=...")
        values[name] = _convert(flag, text if has_value else "true")
    return SimpleNamespace(**values)


def _spec(flag: Flag) -> str:
    if flag.kind is bool:
        return f"--{flag.name}[=true|false]"
    return f"--{flag.name}=" + ("|".join(flag.choices) if flag.choices else f"<{flag.kind.__name__}>")


def usage(prog: str, flags: Sequence[Flag]) -> str:
    """The usage text listing every valid flag with its help and default."""
    specs = {f: _spec(f) for f in (*flags, HELP)}
    width = max(map(len, specs.values())) + 2
    lines = [f"usage: {prog} [--flag=value ...]", "valid flags:"]
    for f, spec in specs.items():
        default = "" if f.default in (None, False) else f" (default: {f.default})"
        lines.append(f"  {spec.ljust(width)}{f.help}{default}")
    return "\n".join(lines)
