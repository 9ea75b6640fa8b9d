"""The chosen format's options, checked before the plan: defaults filled in, unknown names and
impossible values refused in one line naming the option, and the fields the format cannot store
with them (a plan of a folder's samples and of Python samples alike)."""

from __future__ import annotations

import warnings

from .. import formats
from ..errors import PackError
from ..flags import flag, on_command_line
from ..options import OptionError
from .options import check_keywords

# Format options that only make sense with another option's value: name -> (option, values);
# an error on the command line, a warning from Python.
ONLY_WITH = {"quality": ("encoding", ("jpeg",))}


def format_options(name: str, given: dict) -> dict:
    """The format's options with defaults filled in; unknown or impossible ones are errors."""
    check_keywords(given)
    try:
        fmt = formats.get(name)
    except ValueError as exc:
        raise PackError(str(exc)) from None
    unknown = sorted(set(given) - formats.accepted(fmt))
    if unknown:
        names = ", ".join(flag(n) for n in unknown)
        raise PackError(f"option(s) {names} do not apply to {flag('format', name)}")
    options = {**fmt.OPTIONS, **given}
    declared = {**formats.defaults(fmt.FORMAT_OPTIONS), **given}  # with those recorded if given
    for option, (needs, values) in ONLY_WITH.items():
        if option in given and declared.get(needs) not in values:
            text = (
                f"{flag(option)} applies only with {flag(needs, values[0])}, not "
                f"{flag(needs, declared.get(needs))}"
            )
            if on_command_line():
                raise PackError(text)
            warnings.warn(f"{text}: it is ignored", stacklevel=3)
    try:
        fmt.check_options(options)
    except OptionError:
        raise  # it names the option and the value
    except ValueError as exc:
        raise PackError(f"{flag('format', name)}: {exc}") from None
    return options


def check_fields(name: str, fields, options: dict) -> None:
    """A format that cannot store these fields with these options says so (`check_fields`)."""
    check = getattr(formats.get(name), "check_fields", None)
    if check is None:
        return
    try:
        check(fields, options)
    except ValueError as exc:
        raise PackError(f"{flag('format', name)}: {exc}") from None
