"""The error a user can act on: the message says what went wrong and what to do."""


class PackError(RuntimeError):
    """The pack cannot start or go on; the message says why and what to do."""
