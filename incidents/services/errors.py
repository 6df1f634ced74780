"""The one error type of the domain: a request the services refuse, with a code for the kind of
refusal. Interfaces map the code to their own answer (the API and pages to an HTTP status, a
command to its message and exit), so no service knows about HTTP."""

from __future__ import annotations

INVALID = "invalid"  # the request itself is wrong: a field, a value, a time
FORBIDDEN = "forbidden"  # the user's role does not allow it
NOT_FOUND = "not_found"  # what it names is not there (any more)
CONFLICT = "conflict"  # the state does not allow it (already done, resolved before, merged)
THROTTLED = "throttled"  # over a rate limit: the interface says when to try again
CODES = (INVALID, FORBIDDEN, NOT_FOUND, CONFLICT, THROTTLED)
HTTP_STATUS = {INVALID: 400, FORBIDDEN: 403, NOT_FOUND: 404, CONFLICT: 409, THROTTLED: 429}


class RootlineError(Exception):
    """A request the domain refuses; the message is meant for the person who made it and says
    what is wrong and where."""

    def __init__(self, message: str, *, code: str = INVALID) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.message = message
        self.code = code

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]


def invalid(message: str) -> RootlineError:
    return RootlineError(message, code=INVALID)


def forbidden(message: str) -> RootlineError:
    return RootlineError(message, code=FORBIDDEN)


def not_found(message: str) -> RootlineError:
    return RootlineError(message, code=NOT_FOUND)


def conflict(message: str) -> RootlineError:
    return RootlineError(message, code=CONFLICT)
