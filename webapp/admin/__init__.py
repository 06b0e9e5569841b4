"""The admin dashboard: accounts and sessions, CSRF, statistics, charts and background jobs.

Routes live in ``webapp/admin/routes/`` (one module per page) and templates in
``webapp/admin/templates/admin/``; the other modules here hold the logic they call.
"""
