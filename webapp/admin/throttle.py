"""Failed admin logins, throttled per (client address, username), counted in the database.

After ``limit`` failures within ``window`` seconds, that address may not try that username
again until the oldest failure leaves the window: a password guesser gets a handful of
tries per quarter hour instead of as many as argon2 can check. Keyed by address *and*
username so nobody can lock the real admin out by failing on purpose from elsewhere.

The failures are rows of ``RateEvent`` (webapp.http.rate_limits), so every server process sees
the same count (in memory, N uvicorn workers gave a guesser N times the limit). The address
is the peer's, or the one a configured proxy forwarded (TRUSTED_PROXIES): a client cannot
rotate X-Forwarded-For to get fresh keys.

A try is counted before its password is checked (:meth:`LoginThrottle.attempt`, atomic per
key), and forgotten with the other failures when the password was right: concurrent tries
then cannot all pass the check on the same count, and no lock is held while argon2 works.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from webapp.http import rate_limits


@dataclass(frozen=True)
class LoginThrottle:
    limit: int = 5
    window: float = 15 * 60.0

    @staticmethod
    def key(address: str | None, username: str) -> str:
        return f"{address or '?'}|{username.strip().lower()[:64]}"

    def retry_after(self, session: Session, key: str) -> int:
        """Seconds until this key may try again; 0 when it may now."""
        return rate_limits.retry_after(
            session, rate_limits.LOGIN_FAILED, key, self.limit, self.window
        )

    def attempt(self, session: Session, key: str) -> int:
        """Count one try now (committed) and return 0, or the seconds until this key may
        try again and count nothing."""
        wait = rate_limits.take(session, rate_limits.LOGIN_FAILED, key, self.limit, self.window)
        session.commit()
        return wait

    def succeeded(self, session: Session, key: str) -> None:
        rate_limits.clear(session, rate_limits.LOGIN_FAILED, key)
        session.commit()
