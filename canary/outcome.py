"""How a command that judges or carries out a change ends, and the exit code that says so: the one exit-code map
of every command (`rollout run` and the gate, `client-rollout`, `migrate-protocol`, `analyze` and its Spark job,
`sweep`, `release`). A release pipeline reads the code, so each number keeps one meaning everywhere:

    0 PROMOTE        promoted and verified (a verdict: promote)
    1 ROLLBACK       rolled back and verified (a verdict: roll back)
    2 ERROR          nothing was decided and no run was left behind: a usage mistake, input refused, a service
                     that refused the request, or a bug (one line on stderr)
    3 INCONCLUSIVE   a person must decide
    4 UNFINISHED     a run was started and stopped before it was verified, because of an error of the tool or its
                     infrastructure (the lock held by another rollout, storage or cluster unreachable, a step that
                     failed or was refused, a failed rollback or verify, a host the deployer could not reach), not
                     because of a verdict; a change already made was rolled back for safety first (the run says so).
                     The same command with the same run directory goes on from where it stopped
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType


class Outcome(StrEnum):
    """A command's outcome; a StrEnum, so PROMOTE, ROLLBACK and INCONCLUSIVE equal the verdict words."""

    PROMOTE = "PROMOTE"
    ROLLBACK = "ROLLBACK"
    ERROR = "ERROR"
    INCONCLUSIVE = "INCONCLUSIVE"
    UNFINISHED = "UNFINISHED"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self]

    @classmethod
    def of_exit_code(cls, code: int) -> Outcome | None:
        """The outcome a command's exit code stands for; None for a code no command of ours ends with."""
        return next((outcome for outcome, exit_code in EXIT_CODES.items() if exit_code == code), None)


EXIT_CODES = MappingProxyType({Outcome.PROMOTE: 0, Outcome.ROLLBACK: 1, Outcome.ERROR: 2, Outcome.INCONCLUSIVE: 3,
                               Outcome.UNFINISHED: 4})
