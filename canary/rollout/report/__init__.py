"""The rollout's pages: the run report (page: one self-contained HTML page per run, with the sections the run's
kind adds through a KindReport), its timeline, the probe over the whole rollout (plots) and the evidence's path toward
the decision boundary (evidence_path). The library's presentation, apart from the step framework in
canary.rollout.core."""

from canary.rollout.report.page import KindReport, write_report

__all__ = ["KindReport", "write_report"]
