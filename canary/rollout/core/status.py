"""A rollout's status, and the outcome and exit code it stands for: one place for what every kind, the CLI, the
operators and the release hook read from a run."""

from __future__ import annotations

from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK

PROMOTED = "promoted"
ROLLED_BACK = "rolled_back"
VERIFIED = "verified"
# Exit codes of every command that ends a rollout or judges one; 2 is an error that decided nothing.
EXIT = {PROMOTE: 0, ROLLBACK: 1, INCONCLUSIVE: 3}
ERROR_EXIT = 2


class Status(str):
    """The status text run.json keeps ("preflight", "canary deployed", "judged ROLLBACK", "promoted",
    "verified rolled_back", …), knowing what it means. A str, so it is stored and compared as before."""

    @classmethod
    def verified_as(cls, status: str) -> Status:
        return cls(f"{VERIFIED} {status}")

    @property
    def verified(self) -> bool:
        """Verify passed: the rollout is over."""
        return self.startswith(VERIFIED + " ")

    @property
    def finished(self) -> bool:
        """Promote or rollback has finished (verified or not): no further change is made."""
        return self.removeprefix(VERIFIED + " ") in (PROMOTED, ROLLED_BACK)

    @property
    def outcome(self) -> str | None:
        """PROMOTE or ROLLBACK once the change was promoted or rolled back, else None (not decided yet)."""
        done = self.removeprefix(VERIFIED + " ")
        return PROMOTE if done == PROMOTED else ROLLBACK if done == ROLLED_BACK else None
