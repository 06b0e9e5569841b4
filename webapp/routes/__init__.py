"""Routers, one module per area."""
