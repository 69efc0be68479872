"""From tests to verdicts: the parts of a claim, Holm over every test of a benchmark's claims, each part's verdict
by its rule, the claim's verdict from its parts, and a one-line reason.

A part's rule is one of

* ``one``: its test decides (on the expected side: holds; on the other: does not hold; else inconclusive);
* ``all``: every test must decide on the expected side (holds); one on the other side: does not hold;
* ``counterexample``: one test on the expected side suffices (holds); every test on the other: does not hold;
* ``often``: at least ``often_share`` of the tests on the expected side, or tests on both sides (inconsistent),
  holds; every test on the other side: does not hold.

A claim holds when every part holds, does not hold when one part does not, is not testable when a part lacks runs
(and none fails), and is inconclusive otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .evidence import Test, holm

WORDS = {"holds": "holds", "does_not_hold": "does not hold", "inconclusive": "inconclusive",
         "not_testable": "not testable"}


@dataclass
class Part:
    name: str
    title: str
    rule: str                        # one | all | counterexample | often
    expect: int                      # the side of the boundary that supports the claim: +1 above, -1 below
    tests: list[Test] = field(default_factory=list)
    needs: str | None = None         # what to add: the part is not testable
    fixed: str | None = None         # a verdict read, not tested (the judgment completion's)
    note: str = ""
    verdict: str = "inconclusive"

    def decide(self, alpha: float, often: float) -> str:
        if self.needs:
            self.verdict = "not_testable"
            return self.verdict
        if self.fixed:
            self.verdict = self.fixed
            return self.verdict
        sides = [t.side(alpha) for t in self.tests]
        n, hits, against = len(sides), sides.count(self.expect), sides.count(-self.expect)
        verdict = "inconclusive"
        if n and self.rule == "one":
            verdict = "holds" if sides[0] == self.expect else "does_not_hold" if sides[0] == -self.expect else verdict
        elif n and self.rule == "all":
            verdict = "does_not_hold" if against else "holds" if hits == n else verdict
        elif n and self.rule == "counterexample":
            verdict = "holds" if hits else "does_not_hold" if against == n else verdict
        elif n and self.rule == "often":
            verdict = "holds" if hits >= often * n or (hits and against) else \
                "does_not_hold" if against == n else verdict
        self.verdict = verdict
        return verdict

    def headline(self, alpha: float) -> Test | None:
        """The test a reader looks at first: for a part that holds under ``all``, its weakest test; for a decided
        part, its strongest test on the deciding side; else the test nearest to deciding (smallest p)."""
        if not self.tests:
            return None
        if self.verdict in ("holds", "does_not_hold"):
            side = self.expect if self.verdict == "holds" else -self.expect
            deciding = [t for t in self.tests if t.side(alpha) == side]
            if deciding:
                pick = max if self.rule == "all" and self.verdict == "holds" else min
                return pick(deciding, key=lambda t: t.p_holm)
        tested = [t for t in self.tests if t.p_holm == t.p_holm]
        return min(tested, key=lambda t: t.p_holm) if tested else self.tests[0]

    def summary(self, alpha: float) -> str:
        if self.verdict == "not_testable":
            return f"{self.title}: not testable ({self.needs})"
        if self.fixed:
            return f"{self.title}: {WORDS[self.verdict]}" + (f" ({self.note})" if self.note else "")
        if not self.tests:
            return f"{self.title}: {WORDS[self.verdict]}" + (f" ({self.note})" if self.note else " (no test)")
        if len(self.tests) == 1:
            return f"{self.title}: {WORDS[self.verdict]} ({describe(self.tests[0])})"
        sides = [t.side(alpha) for t in self.tests]
        return (f"{self.title}: {WORDS[self.verdict]} ({sides.count(self.expect)} of {len(sides)} comparisons on the "
                f"claimed side, {sides.count(-self.expect)} against, at Holm-adjusted p < {alpha:g})")


def pvalue(p) -> str:
    return "n/a" if p is None or p != p else ("<0.0001" if p < 1e-4 else f"{p:.4f}")


def describe(t: Test) -> str:
    """A test in a few words: its label, effect, interval and adjusted p."""
    if t.effect != t.effect or t.ci_low != t.ci_low:
        return f"{t.label}: {t.detail.get('note', 'no test')}"
    if t.unit == "points":
        text = f"{t.label} {t.effect * 100:+.2f} points [{t.ci_low * 100:+.2f}, {t.ci_high * 100:+.2f}]"
        if "factor" in t.detail:
            text += f", tested as a - {t.detail['factor']:g} b"
    else:
        name = "rho " if t.unit == "rho" else ""
        text = f"{t.label} {name}{t.effect:.3f} [{t.ci_low:.3f}, {t.ci_high:.3f}] against {t.boundary:g}"
    skipped = t.detail.get("skipped_not_finite")
    return text + f", n {t.n}" + (f" ({skipped} left out: not finite)" if skipped else "") + \
        f", p Holm {pvalue(t.p_holm)}"


def decide(claim: dict, parts: list[Part], rules: dict) -> dict:
    """The claim's verdict from its (already Holm-corrected) parts, with the reason and the headline effect."""
    alpha = rules["alpha"]
    verdicts = [p.decide(alpha, rules["often_share"]) for p in parts]
    if "does_not_hold" in verdicts:
        verdict = "does_not_hold"
    elif verdicts and all(v == "holds" for v in verdicts):
        verdict = "holds"
    elif "not_testable" in verdicts:
        verdict = "not_testable"
    else:
        verdict = "inconclusive"
    deciding = next((p for p in parts if p.verdict == verdict and p.tests), None) or \
        next((p for p in parts if p.tests), None)
    head = deciding.headline(alpha) if deciding else None
    needs = "; ".join(p.needs for p in parts if p.needs)
    # the one-line reason: the part that decides the verdict (every part's summary is in the evidence)
    why = next((p for p in parts if p.verdict == verdict), deciding)
    if verdict == "not_testable":
        reason = f"not testable: {needs}"
    elif verdict == "holds" and len(parts) > 1:
        reason = "every part holds: " + "; ".join(p.summary(alpha) for p in parts)
    else:
        reason = why.summary(alpha) if why else WORDS[verdict]
    return {"verdict": verdict, "reason": reason, "needs": needs or None,
            "effect": None if head is None else {"part": deciding.name, **head.as_dict()},
            "parts": [{"name": p.name, "title": p.title, "rule": p.rule,
                       "expected_side": "above" if p.expect > 0 else "below", "verdict": p.verdict,
                       "summary": p.summary(alpha), "needs": p.needs, "note": p.note or None,
                       "tests": [t.as_dict() for t in p.tests]} for p in parts]}


def correct(parts_by_claim: dict[str, list[Part]]) -> int:
    """Holm over every test of every claim of one benchmark; returns the family's size."""
    tests = [t for parts in parts_by_claim.values() for p in parts for t in p.tests]
    holm(tests)
    return sum(1 for t in tests if not math.isnan(t.p))
