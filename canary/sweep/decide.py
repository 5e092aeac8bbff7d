"""The sweep's verdict from the judge's: DEGRADED when an SLO guard is breached or the comparison finds a
regression (the judge's ROLLBACK); INCONCLUSIVE when the data do not suffice; else HEALTHY. The reason is in a
sweep's words (this sweep, the reference) rather than the judge's lanes."""

from __future__ import annotations

import re

from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK, Brief, Decision
from canary.sweep.config import DEGRADED, HEALTHY
from canary.sweep.summary import percent_text


def breached_guards(guards: dict | None) -> list[dict]:
    """The metrics whose SLO guard this sweep breached."""
    return [metric for metric in (guards or {}).get("metrics", [])
            if metric.get("slo") and metric["slo"]["lanes"].get("canary", {}).get("breached")]


def decide(guards: dict | None, comparison: dict | None, reference: int, history: int = 0) -> tuple[str, str]:
    """(verdict, reason) from the guards' and the comparison's judge verdicts; `reference`: sweeps pooled,
    `history`: sweeps in the history before this one."""
    breached = breached_guards(guards)
    if breached:
        return DEGRADED, "SLO breached: " + "; ".join(breach_text(metric) for metric in breached)
    if comparison is None:
        return _decide_without_reference(guards, history)
    against = f"the last {reference} healthy sweep(s)" if reference != 1 else "the last healthy sweep"
    compared, guarded = Brief.of(comparison), Brief.of(guards) if guards is not None else None
    if compared.verdict == ROLLBACK:
        return DEGRADED, f"worse than {against}: {relabel(compared.reason)}"
    if compared.verdict == INCONCLUSIVE:
        return INCONCLUSIVE, f"compared with {against}: {relabel(compared.reason)}"
    if guarded is not None and guarded.verdict != PROMOTE:
        return INCONCLUSIVE, f"SLO guards: {relabel(guarded.reason)}"
    decided = sum(1 for metric in comparison["metrics"] if metric["decision"] in (Decision.PASS, Decision.FAIL))
    return HEALTHY, (f"no regression against {against} in {decided} metric(s)"
                     + (" and within every SLO guard" if guards is not None else ""))


def _decide_without_reference(guards: dict | None, history: int) -> tuple[str, str]:
    """No earlier healthy sweep to compare with (the cluster's first sweep, or other probe settings): the SLO
    guards alone judge, and the reason says so."""
    first = ("first sweep of this cluster: no history to compare with yet" if not history else
             f"no earlier healthy sweep with these probe settings to compare with ({history} sweep(s) in the "
             f"history)") + "; judged by the SLO guards only"
    if guards is None:
        return INCONCLUSIVE, first + ", and no metric has an SLO guard"
    judged = Brief.of(guards)
    if judged.verdict == PROMOTE:
        guarded = ", ".join(metric["name"] for metric in guards["metrics"])
        return HEALTHY, f"{first}: within every guard ({guarded})"
    return INCONCLUSIVE, f"{first}: {relabel(judged.reason)}"


def breach_text(metric: dict) -> str:
    """One breached guard: what was observed, the guard, and the evidence."""
    seen, guard = metric["canary"], metric["slo"]
    if metric["kind"] == "rate":
        value = percent_text(seen.get("rate"))
    else:
        value = f"{seen.get('value') or 0:.4g} {seen.get('unit', '')}"
    return (f"{metric['name']}: {value.strip()} observed, guard {guard['guard']} (e-value "
            f"{guard['lanes']['canary']['e_value']:.3g} >= {guard['threshold']:.3g})")


def relabel(text: str) -> str:
    """The judge's lane words in a sweep's terms: canary = this sweep, baseline = the reference."""
    text = re.sub(r"\bbaseline's\b", "reference's", text)
    text = re.sub(r"\bbaseline\b", "reference", text)
    text = re.sub(r"\bcanary's\b", "this sweep's", text)
    return re.sub(r"\bcanary\b", "this sweep", text)
