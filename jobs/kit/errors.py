"""What can stop a job, in one place: the errors worded for the user and the exit code each
gives (jobs/lake/runs.py `exit_code` maps them; a scheduler reads the codes).

    0   done (also: a retry of a run that committed already)
    1   failed (a bug, a lost metastore, a conservation check): the log says what
    2   the user's config or input is wrong: one line on stderr naming the file or key
    75  the lake is busy (another job holds its lock): nothing was done, try again later

Training (training/) raises the same ConfigError, so its `--set` errors read the same.
"""

from __future__ import annotations

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2  # a ConfigError or InputError
EXIT_BUSY = 75  # EX_TEMPFAIL: nothing was wrong, try again later (cron logs tell it apart)


class ConfigError(ValueError):
    """A configuration problem, worded for the user (names the file or key)."""


class InputError(ValueError):
    """Input that cannot be read at all (missing file, mismatched Moses pair, empty file,
    corrupt gzip, UTF-16/32 text)."""


class ConservationError(RuntimeError):
    """Rows in != clean + rejected for some (pair, corpus): the run must not commit."""
