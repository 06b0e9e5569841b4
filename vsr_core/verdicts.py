"""Everything that decides Examples besides their votes, loaded once for the code that reads
Examples in Python (the export, matching): the study's adjudications and, when its keep rule
is a label model, that model's cached labels. ``Verdicts.of`` applies vsr_core.kept's rule,
so an export and matching keep exactly what the dashboard counts as kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vsr_core.adjudication import AdjudicationInfo, load_adjudications
from vsr_core.agreement import Threshold
from vsr_core.kept import Verdict, final_label, model_of, verdict
from vsr_core.label_fit import load_model_labels
from vsr_core.models import KeepRule


@dataclass(frozen=True)
class Verdicts:
    threshold: Threshold
    rule: str = KeepRule.agreement.value
    adjudications: dict[int, AdjudicationInfo] = field(default_factory=dict)
    model_labels: dict[int, bool] = field(default_factory=dict)

    def of(self, example_id: int, label: bool, agree: int, n: int) -> Verdict:
        adj = self.adjudications.get(example_id)
        model = self.model_labels.get(example_id)
        return verdict(
            agree,
            n,
            self.threshold,
            adjudication=adj.decision if adj else None,
            model_agrees=None if model is None else model == label,
        )

    def label_of(self, example_id: int, label: bool) -> bool:
        adj = self.adjudications.get(example_id)
        return final_label(label, adj.decision if adj else None)


def load_verdicts(bind: Any, study_id: int, threshold: Threshold, rule: str) -> Verdicts:
    """The study's adjudications and its keep rule's cached labels (a connection or session)."""
    model = model_of(rule)
    return Verdicts(
        threshold,
        rule,
        load_adjudications(bind, study_id),
        load_model_labels(bind, study_id, model) if model else {},
    )
