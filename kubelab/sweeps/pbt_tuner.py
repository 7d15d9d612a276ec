"""PBT on the sweep's study: hands out a population generation by generation (`population.py`
decides who copies whom), and tells a member's trial where to go on from.

Every member's trial is an ordinary study trial whose user attributes hold its parameters and
its lineage (`{generation, member, parent, from_run, start_step, exploited}`), recorded before
`ask()` returns, like any suggestion: a restarted driver hands out the same plan (it is drawn
from a generator seeded by the sweep's seed and the generation). A generation's members are
asked one at a time; once each has a trial, `ask()` raises `NothingYet` until the last one
ends, then plans the next generation from their results and their checkpoints.

The checkpoint is copied by `Experiments.submit` from the parent's run folder into the new
run's before the backend starts it, so the trial's `kubelab.latest_checkpoint()` is the
parent's; both backends keep run folders where the submitter writes (this machine's disk, the
user's workspace claim), and the lineage names runs and steps, never paths.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from optuna.trial import FrozenTrial, TrialState

from kubelab.sweeps.lineage import Locate
from kubelab.sweeps.population import Member, PopulationStuck, Settings, next_generation
from kubelab.sweeps.tuners import (
    LINEAGE_ATTR,
    META_ATTR,
    PARAMS_ATTR,
    RERUN_ATTR,
    NothingYet,
    Suggestion,
    SweepExhausted,
    Tuner,
)

if TYPE_CHECKING:
    import optuna


class PopulationFailed(SweepExhausted):
    """The next generation cannot start; the sweep ends Failed with this message."""

    fails_sweep = True


class PopulationTuner(Tuner):
    """A Tuner whose trials come in generations of `population_size` members (NNI's PBTTuner)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = Settings.of(self.choice.kwargs)
        self.locate: Locate = lambda number: None  # the driver's (`lineage.checkpoints_of`)

    def ask(self) -> Suggestion:
        if not self._trials(TrialState.WAITING):
            self._enqueue_next()
        trial = self.study.ask()
        self._handles[trial.number] = trial
        return self._hand_out(trial)

    def rerun(self, number: int) -> Suggestion:
        """An interrupted member again: the same parameters, lineage and checkpoint."""
        frozen = self._frozen(number)
        attrs = {RERUN_ATTR: number, LINEAGE_ATTR: frozen.user_attrs.get(LINEAGE_ATTR)}
        if frozen.user_attrs.get(PARAMS_ATTR) is not None:
            attrs[PARAMS_ATTR] = frozen.user_attrs[PARAMS_ATTR]
        self.study.enqueue_trial(frozen.params, user_attrs=attrs, skip_if_exists=False)
        trial = self.study.ask()
        self._handles[trial.number] = trial
        return self._hand_out(trial)

    # -- generations -------------------------------------------------------------------------
    def _hand_out(self, trial: optuna.trial.Trial) -> Suggestion:
        params = trial.user_attrs.get(PARAMS_ATTR)
        if params is None:  # a first-generation member: the sampler draws it
            return self._fill(trial)
        return Suggestion(trial.number, params, self._flatten(params), trial.user_attrs.get(LINEAGE_ATTR))

    def _enqueue_next(self) -> None:
        """Record the next member to hand out: of this generation, else of the next one."""
        latest = self._latest()
        generation = max((g for g, _ in latest), default=0)
        current = {m: t for (g, m), t in latest.items() if g == generation}
        size = self.settings.population_size
        if len(current) == size:
            if any(not t.state.is_finished() for t in current.values()):
                raise NothingYet(f"generation {generation} of the population is still running")
            generation, current = generation + 1, {}
        member = min(set(range(size)) - set(current))
        if generation == 0:
            lineage = {"generation": 0, "member": member, "parent": None, "start_step": 0}
            self.study.enqueue_trial({}, user_attrs={LINEAGE_ATTR: lineage}, skip_if_exists=False)
            return
        previous = {m: t for (g, m), t in latest.items() if g == generation - 1}
        plan, lineage = self._plan(generation, previous)[member]
        attrs = {PARAMS_ATTR: plan, LINEAGE_ATTR: lineage}
        self.study.enqueue_trial({}, user_attrs=attrs, skip_if_exists=False)

    def _plan(
        self, generation: int, previous: dict[int, FrozenTrial]
    ) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
        """Every member of `generation`: (parameters, lineage), the same however often it is asked."""
        done = TrialState.COMPLETE
        members = [
            Member(m, t.number, t.value if t.state == done else None, t.user_attrs[PARAMS_ATTR])
            for m, t in previous.items()
        ]
        rng = random.Random(f"{self.study.user_attrs[META_ATTR]['seed']}/pbt/{generation}")
        try:
            plans = next_generation(members, self.settings, self.space, self.direction, rng)
        except PopulationStuck as exc:
            raise PopulationFailed(f"pbt cannot start generation {generation}: {exc}") from None
        planned = {}
        for plan in plans:
            found = self.locate(plan.parent)
            if found is None:
                raise PopulationFailed(
                    f"pbt cannot start generation {generation}: trial {plan.parent} saved no checkpoint. "
                    "PBT starts each member from a checkpoint, so the trial must call "
                    "kubelab.save_checkpoint(step, write) before it ends"
                )
            step, run_id = found
            lineage = {
                "generation": generation,
                "member": plan.member,
                "parent": plan.parent,
                "from_run": run_id,
                "start_step": step,
                "exploited": plan.exploited,
            }
            planned[plan.member] = (plan.params, lineage)
        return planned

    def _latest(self) -> dict[tuple[int, int], FrozenTrial]:
        """(generation, member) -> its latest trial (a rerun replaces the interrupted one)."""
        latest: dict[tuple[int, int], FrozenTrial] = {}
        for trial in self._trials():
            lineage = trial.user_attrs.get(LINEAGE_ATTR)
            if lineage is not None:
                latest[(lineage["generation"], lineage["member"])] = trial  # in trial-number order
        return latest
