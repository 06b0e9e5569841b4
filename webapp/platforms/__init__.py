"""Crowd platforms (Prolific, MTurk): one client per platform behind a common protocol,
and the plan/apply engine that approves, rejects and pays exactly once."""
