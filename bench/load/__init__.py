"""Load and fault benchmark of the validation task: ``python -m bench.load --help``."""
