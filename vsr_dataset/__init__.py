"""Importers, splits, JSONL export, statistics, dataset card, and the CLI that wires it all."""
