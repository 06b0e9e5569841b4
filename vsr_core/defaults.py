"""Defaults that more than one floor offers: the sampler and the matcher, their commands, and
the dashboard's job forms. They live here because vsr_core is the floor all of them may
import (the web app may not import collection or matching), so each is written once."""

from __future__ import annotations

# The study migration 0007 created from studies/vsr.toml (``Study.is_default``): rows made
# without a study belong to it, as every row of a database older than 0007 does.
DEFAULT_STUDY_ID = 1

# VSR's sampling rule: an instance counts only with an area of at least this many square
# pixels (Liu et al. 2023). A study file states its own (its sampling.min_area_px).
MIN_AREA_PX = 30_000

# Adversarial matching (matching.params.MatchParams) as the dashboard's job form offers it:
# the weight h of log(1 - P_sim), k distractors per query, and the seed of ties and order.
MATCH_H = 1.0
MATCH_K = 3
MATCH_SEED = 0
