"""Core: settings, database, tables, relation vocabulary, captions and agreement statistics.

Imports nothing else of ours (see DESIGN.md).
"""
