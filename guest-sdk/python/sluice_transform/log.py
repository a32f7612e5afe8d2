"""Log messages to the pipeline's log, attributed to the module (rate-limited by the
host). Outside a module they go to stderr."""

import sys


def _write(level: str, message: str) -> None:
    try:
        from ._guest import _log
    except ImportError:
        print(f"{level}: {message}", file=sys.stderr)
        return
    _log(level, message)


def debug(message: str) -> None:
    """Detail for debugging a transform (off unless the pipeline's log level shows it)."""
    _write("DEBUG", message)


def info(message: str) -> None:
    """Normal operation."""
    _write("INFO", message)


def warn(message: str) -> None:
    """Something looks wrong; the transform carries on."""
    _write("WARN", message)


def error(message: str) -> None:
    """Something failed."""
    _write("ERROR", message)
