"""The tuner: asks Optuna for trial parameters, tells it results, and survives restarts.

A `Tuner` wraps one `optuna.Study`. With `storage="sqlite:///…/study.db"` (any Optuna RDB
URL) every suggestion is written before `ask()` returns, so a new process that opens the
same study name continues where the old one stopped: running trials are still known
(`running()`), an `ask()` interrupted half-way is finished on reopen, and the next
suggestion is new. One driver should own a study at a time.

Samplers are Optuna's (each tuner's entry in `tuner_catalog.TUNER_KINDS` builds its own);
only `anneal` is kubelab's own.
"""

from __future__ import annotations

import json
import math
import random
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import optuna
from optuna.trial import TrialState

from kubelab.errors import Conflict, FieldError, NotFound, ValidationError
from kubelab.sweeps import encoding
from kubelab.sweeps.progressive_grid import ProgressiveGrid, needs_progressive
from kubelab.sweeps.pruners import PrunerChoice, check_pruner
from kubelab.sweeps.space import Option, Parameter, Scalar, SearchSpace
from kubelab.sweeps.tuner_catalog import TunerChoice, check_batch, check_tuner

STATES = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED, "failed": TrialState.FAIL}
PARAMS_ATTR = "kubelab_params"
RERUN_ATTR = "kubelab_rerun_of"  # a trial that runs again an interrupted trial's parameters
LINEAGE_ATTR = "kubelab_lineage"  # a PBT member's generation, member and parent (pbt_tuner.py)
META_ATTR = "kubelab"


class SweepExhausted(Conflict):
    """Grid or batch tuners have handed out every configuration; with `fails_sweep`, the tuner
    cannot go on and the sweep ends Failed with this message (PBT without a checkpoint)."""

    error = "exhausted"
    fails_sweep = False


class NothingYet(Conflict):
    """Nothing to hand out until a running trial ends (PBT waits for its generation)."""


@dataclass(frozen=True)
class Suggestion:
    """One trial's parameters: NNI-shaped (`params`) and flat for command lines (`flat`), and
    for a PBT member its `lineage` (generation, member, parent trial, the step it goes on from)."""

    number: int
    params: dict[str, Any]
    flat: dict[str, Scalar]
    lineage: dict[str, Any] | None = None


@dataclass(frozen=True)
class TrialSummary:
    number: int
    state: str
    value: float | None
    params: dict[str, Any] | None


class Tuner:
    def __init__(
        self,
        space: SearchSpace,
        name: str | TunerChoice = "tpe",
        args: Mapping[str, Any] | None = None,
        *,
        storage: str | optuna.storages.BaseStorage | None = None,
        study_name: str | None = None,
        direction: str | None = None,
        pruner: Any = None,
        batch: list[dict[str, Any]] | None = None,
    ) -> None:
        self.space = space
        self.choice, pruner_choice, self._batch = _validate(space, name, args, pruner, batch)
        self.direction = _direction(direction, self.choice, pruner_choice)
        if storage is not None and not study_name:
            raise ValidationError(
                "invalid tuner",
                [FieldError("study_name", "is required with a storage, so the sweep can be reopened")],
            )
        unavailable = self.choice.unavailable()
        if unavailable is not None:
            raise ValidationError("tuner unavailable", [unavailable])
        self.study = optuna.create_study(
            storage=storage,
            study_name=study_name,
            direction=self.direction,
            pruner=pruner_choice.build(),
            sampler=optuna.samplers.RandomSampler(),
            load_if_exists=True,
        )
        seed = self._claim_study()
        existing = len(self.study.get_trials(deepcopy=False))
        self.study.sampler = build_sampler(self.choice, seed, existing)
        self._handles: dict[int, optuna.trial.Trial] = {}
        grid = self.choice.kind.walks == "grid"
        # NNI's grid divides continuous ranges ever finer: its configurations are enqueued.
        self._progressive = ProgressiveGrid(space) if grid and needs_progressive(space) else None
        if self._progressive is not None:
            self.study.sampler = optuna.samplers.RandomSampler(seed=seed)
        self._dists = {
            p.key: encoding.distribution(p, finite=grid and self._progressive is None) for p in space.walk()
        }
        self._batch_choices = _batch_choices(self._batch)
        self._finish_interrupted_asks()

    # -- the driver's calls ------------------------------------------------------------

    def ask(self) -> Suggestion:
        """The next trial's parameters, recorded in the study before they are returned."""
        if self.exhausted():
            raise SweepExhausted(f"the {self.choice.name} tuner has handed out every configuration")
        if self._batch is not None and not self._trials(TrialState.WAITING):
            config = self._batch[len(self._fresh())]
            self.study.enqueue_trial({k: v for k, v in config.items()})
        if self._progressive is not None and not self._trials(TrialState.WAITING):
            point = self._progressive.nth(len(self._fresh()))
            if point is not None:
                self.study.enqueue_trial(point)
        trial = self.study.ask()
        self._handles[trial.number] = trial
        return self._fill(trial)

    def rerun(self, number: int) -> Suggestion:
        """A new trial with trial `number`'s parameters, recorded (with its origin) before it returns.

        For a trial the sweep's stop interrupted: it runs again on resume, and the sampler
        sees the same point rather than a new one.
        """
        frozen = self._frozen(number)
        self.study.enqueue_trial(frozen.params, user_attrs={RERUN_ATTR: number}, skip_if_exists=False)
        trial = self.study.ask()
        self._handles[trial.number] = trial
        return self._fill(trial)

    def reruns(self) -> set[int]:
        """The trials already run again (`rerun`): the study records it, so a crash cannot double one."""
        return {t.user_attrs[RERUN_ATTR] for t in self._trials() if RERUN_ATTR in t.user_attrs}

    def tell(self, number: int, value: float | None = None, state: str = "complete") -> str:
        """Record a trial's end; returns the state recorded. Repeating the same tell is harmless.

        A `complete` trial whose value is NaN or infinite is recorded as `failed`.
        """
        if state not in STATES:
            raise ValidationError(
                "invalid result", [FieldError("state", f"must be one of {', '.join(STATES)}, not {state!r}")]
            )
        frozen = self._frozen(number)
        target = STATES[state]
        if state == "complete":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValidationError(
                    "invalid result",
                    [FieldError("value", f"a completed trial needs its objective value, not {value!r}")],
                )
            if not math.isfinite(value):
                target, value = TrialState.FAIL, None
        else:
            value = None
        if frozen.state.is_finished():
            if frozen.state == target:
                return _state_name(target)
            raise Conflict(f"trial {number} already finished as {_state_name(frozen.state)}")
        self.study.tell(number, None if value is None else float(value), state=target)
        self._handles.pop(number, None)
        return _state_name(target)

    def report(self, number: int, step: int, value: float) -> bool:
        """Record an intermediate value; True when the pruner says to stop this trial."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValidationError(
                "invalid report", [FieldError("step", f"must be a whole number >= 0, not {step!r}")]
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError("invalid report", [FieldError("value", f"must be a number, not {value!r}")])
        frozen = self._frozen(number)
        if frozen.state.is_finished():
            raise Conflict(f"trial {number} already finished as {_state_name(frozen.state)}")
        trial = self._handles.get(number) or optuna.trial.Trial(self.study, frozen._trial_id)
        trial.report(float(value), step)
        return trial.should_prune()

    def exhausted(self) -> bool:
        """True when a grid or batch tuner has nothing left to hand out (others never run out)."""
        if self._batch is not None:
            return len(self._fresh()) >= len(self._batch) and not self._trials(TrialState.WAITING)
        if self.choice.kind.walks != "grid":
            return False
        if self._progressive is not None:
            waiting = self._trials(TrialState.WAITING)
            return not waiting and self._progressive.nth(len(self._fresh())) is None
        seen = {
            json.dumps(t.user_attrs[PARAMS_ATTR], sort_keys=True)
            for t in self._trials()
            if PARAMS_ATTR in t.user_attrs
        }
        size = self.space.grid_size()
        return size is not None and len(seen) >= size

    def best(self) -> dict[str, Any] | None:
        """The best completed trial as `{number, value, params}`, or None before any completes."""
        if not self._trials(TrialState.COMPLETE):
            return None
        trial = self.study.best_trial
        return {"number": trial.number, "value": trial.value, "params": trial.user_attrs.get(PARAMS_ATTR)}

    def importance(self) -> dict[str, float]:
        """Parameter importance by Optuna's PED-ANOVA (needs no extra packages), keyed by storage key.

        Empty until two trials have completed. fANOVA would need scikit-learn.
        """
        if len(self._trials(TrialState.COMPLETE)) < 2 or not (self._dists or self._batch_choices):
            return {}
        from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = get_param_importances(self.study, evaluator=PedAnovaImportanceEvaluator())
        return {name: float(score) for name, score in scores.items()}

    def running(self) -> list[Suggestion]:
        """Trials handed out and not yet told — after a restart, the ones to re-attach or fail."""
        return [self._suggestion(t) for t in self._trials(TrialState.RUNNING) if PARAMS_ATTR in t.user_attrs]

    def suggestion(self, number: int) -> Suggestion:
        return self._suggestion(self._frozen(number))

    def trials(self) -> list[TrialSummary]:
        return [
            TrialSummary(t.number, _state_name(t.state), t.value, t.user_attrs.get(PARAMS_ATTR))
            for t in self._trials()
            if t.state != TrialState.WAITING
        ]

    # -- internals -------------------------------------------------------------------------

    def _fill(self, trial: optuna.trial.Trial) -> Suggestion:
        if self._batch is not None:
            config = self._batch_config(trial)
            for name in config:
                trial.suggest_categorical(name, self._batch_choices[name])
            params: dict[str, Any] = dict(config)
        else:
            params = self._suggest_scope(trial, self.space.params)
        trial.set_user_attr(PARAMS_ATTR, params)
        return Suggestion(trial.number, params, self._flatten(params), trial.user_attrs.get(LINEAGE_ATTR))

    def _suggest_scope(self, trial: optuna.trial.Trial, scope: tuple[Parameter, ...]) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for param in scope:
            raw = encoding.suggest(trial, param, self._dists[param.key])
            if param.nested:
                option = _option(param, raw)
                params[param.name] = {"_name": option.value, **self._suggest_scope(trial, option.space or ())}
            else:
                params[param.name] = encoding.decode(param, raw)
        return params

    def _flatten(self, params: dict[str, Any]) -> dict[str, Scalar]:
        return dict(params) if self._batch is not None else self.space.flatten(params)

    def _suggestion(self, frozen: optuna.trial.FrozenTrial) -> Suggestion:
        params = frozen.user_attrs.get(PARAMS_ATTR)
        if params is None:
            raise NotFound(f"trial {frozen.number} has no parameters yet")
        return Suggestion(frozen.number, params, self._flatten(params), frozen.user_attrs.get(LINEAGE_ATTR))

    def _batch_config(self, trial: optuna.trial.Trial) -> dict[str, Any]:
        """A batch trial's configuration: its origin's for a rerun (of a rerun...), else its own."""
        assert self._batch is not None
        number = trial.number
        while (origin := self._frozen(number).user_attrs.get(RERUN_ATTR)) is not None:
            number = origin
        reruns = [t for t in self._trials() if t.number < number and RERUN_ATTR in t.user_attrs]
        return self._batch[number - len(reruns)]

    def _fresh(self) -> list[optuna.trial.FrozenTrial]:
        """Trials the tuner chose (reruns of interrupted ones excluded): how far a batch or grid has got."""
        return [t for t in self._trials() if RERUN_ATTR not in t.user_attrs]

    def _frozen(self, number: int) -> optuna.trial.FrozenTrial:
        # One row from the storage, not every trial: tell() and report() call this per result.
        storage, study_id = self.study._storage, self.study._study_id
        try:
            return storage.get_trial(storage.get_trial_id_from_study_id_trial_number(study_id, number))
        except KeyError:
            raise NotFound(f"the sweep has no trial {number}") from None

    def _trials(self, state: TrialState | None = None) -> list[optuna.trial.FrozenTrial]:
        states = None if state is None else (state,)
        return self.study.get_trials(deepcopy=False, states=states)

    def _claim_study(self) -> int:
        """Record (or check) what this study is for; returns the seed the sweep uses."""
        meta = {"tuner": self.choice.to_dict(), "space": self.space.to_dict(), "batch": self._batch}
        recorded = self.study.user_attrs.get(META_ATTR)
        name = self.study.study_name
        if recorded is None:
            if self.study.get_trials(deepcopy=False):
                raise Conflict(
                    f"study '{name}' already has trials from outside kubelab; use another study name"
                )
            seed = self.choice.seed if self.choice.seed is not None else random.randrange(2**31)
            self.study.set_user_attr(META_ATTR, {**meta, "seed": seed})
            return seed
        if {k: recorded.get(k) for k in meta} != json.loads(json.dumps(meta)):
            raise Conflict(
                f"study '{name}' belongs to a sweep with another tuner, search space or batch; "
                "a changed sweep needs a new study name"
            )
        if self.study.direction.name.lower() != self.direction:
            raise Conflict(
                f"study '{name}' was created to {self.study.direction.name.lower()}, not {self.direction}"
            )
        return int(recorded["seed"])

    def _finish_interrupted_asks(self) -> None:
        """A process that died inside `ask()` left a running trial without parameters: complete it."""
        for frozen in self._trials(TrialState.RUNNING):
            if PARAMS_ATTR not in frozen.user_attrs:
                self._fill(optuna.trial.Trial(self.study, frozen._trial_id))


def build_sampler(choice: TunerChoice, seed: int, existing_trials: int = 0) -> optuna.samplers.BaseSampler:
    """The Optuna sampler for a tuner: its registry entry builds it (`TunerKind.sampler`)."""
    sampler: optuna.samplers.BaseSampler = choice.kind.sampler(seed, choice.kwargs, existing_trials)
    return sampler


def _validate(
    space: SearchSpace, name: str | TunerChoice, args: Any, pruner: Any, batch: Any
) -> tuple[TunerChoice, PrunerChoice, list[dict[str, Any]] | None]:
    errors: list[FieldError] = []
    if isinstance(name, TunerChoice):
        choice = name
    else:
        choice, problems = check_tuner({"name": name, "args": args} if args is not None else name)
        errors += problems
    pruner_choice, problems = check_pruner(pruner)
    errors += problems
    configs = None
    if not errors:
        errors += choice.check(space)
        if choice.kind.walks == "batch":
            if len(space):
                errors.append(
                    FieldError("space", "the batch tuner runs the listed configurations; leave space out")
                )
            configs, problems = check_batch(batch)
            errors += problems
        elif batch is not None:
            errors.append(FieldError("batch", "configurations are only for the batch tuner"))
    if errors:
        raise ValidationError("invalid tuner", errors)
    return choice, pruner_choice, configs


def _direction(
    direction: str | None, choice: TunerChoice, pruner: PrunerChoice
) -> Literal["minimize", "maximize"]:
    if direction is not None and direction not in ("minimize", "maximize"):
        raise ValidationError(
            "invalid tuner", [FieldError("direction", f"must be minimize or maximize, not {direction!r}")]
        )
    said = {
        "objective.direction": direction,
        "tuner.args.optimize_mode": choice.direction,
        "early_stopping.args.optimize_mode": pruner.direction,
    }
    given = {path: value for path, value in said.items() if value}
    if len(set(given.values())) > 1:
        detail = ", ".join(f"{path} says {value}" for path, value in given.items())
        path = "tuner.args.optimize_mode" if choice.direction else "early_stopping.args.optimize_mode"
        raise ValidationError("invalid tuner", [FieldError(path, f"directions disagree: {detail}")])
    return "maximize" if next(iter(given.values()), "minimize") == "maximize" else "minimize"


def _batch_choices(configs: list[dict[str, Any]] | None) -> dict[str, list[Any]]:
    choices: dict[str, dict[tuple[bool, Any], Any]] = {}
    for config in configs or []:
        for name, value in config.items():
            choices.setdefault(name, {}).setdefault((isinstance(value, bool), value), value)
    return {name: list(values.values()) for name, values in choices.items()}


def _option(param: Parameter, value: Any) -> Option:
    for option in param.options:
        if option.value == value and isinstance(option.value, bool) == isinstance(value, bool):
            return option
    raise ValueError(f"{value!r} is not an option of {param.name}")


def _state_name(state: TrialState) -> str:
    return {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "failed"}.get(
        state, state.name.lower()
    )
