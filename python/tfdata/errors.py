"""Exceptions raised by tfdata.

Every error from the C++ library arrives as one of these classes, chosen by its status code, with
the message that ``tfdata`` (the CLI) prints after ``tfdata: error:``. Each also derives from the
builtin exception a Python caller would catch: a bad pipeline is a ``ValueError``, an unknown
dataset a ``LookupError``, an unreachable dispatcher a ``ConnectionError``.
"""


class Error(RuntimeError):
    """Base class of tfdata's errors."""


class InvalidArgumentError(Error, ValueError):
    """Bad input: a pipeline that does not validate, a bad argument, bad data on a worker."""


class NotFoundError(Error, LookupError):
    """An unknown dataset id, a missing file."""


class UnavailableError(Error, ConnectionError):
    """The dispatcher or a worker cannot be reached."""


class DeadlineExceededError(Error, TimeoutError):
    """A call did not complete in time."""


class FailedPreconditionError(Error):
    """The system is not in a state for the call (e.g. a job's readers disagree on its mode)."""


class AlreadyExistsError(Error):
    """A dataset id already names another pipeline."""


class DataLossError(Error):
    """Corrupt data: a damaged record file, a damaged journal."""


class ResourceExhaustedError(Error):
    """A limit was reached."""


class OutOfRangeError(Error, IndexError):
    """A value outside its range."""


class CancelledError(Error):
    """The call was cancelled."""


class UnimplementedError(Error, NotImplementedError):
    """Not supported."""


class PermissionDeniedError(Error, PermissionError):
    """Not allowed."""


class UnauthenticatedError(Error, PermissionError):
    """A server refused the call: a missing or wrong auth token (tfdata.set_client_security)."""


class DataLossWarning(RuntimeWarning):
    """A read ended having lost data: tasks dropped because their workers became unreachable
    (and, in distributed_epoch, the splits they held). The CLI ends such a read with exit code 4.
    To make it an error: ``warnings.simplefilter("error", tfdata.DataLossWarning)``."""


__all__ = [name for name in dir() if name.endswith("Error")] + ["DataLossWarning"]
