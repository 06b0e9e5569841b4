"""The admin dashboard: accounts and sessions, CSRF, statistics, charts and background jobs.

Routes live in ``webapp/routes/admin*.py``; this package holds the logic they call.
"""
