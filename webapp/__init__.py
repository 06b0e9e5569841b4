"""FastAPI app factory, routes, templates, task assignment, image rendering, auth."""
