"""The magics: `%%train`, `%train -f`, `%sweep`, `%pipeline`, `%experiments`, `%logs`, `%stop`,
`%tensorboard`, `%gpus`, `%serve`.

Each magic reads its options (errors come back as usage errors naming the option), builds
and validates what it will send, sends it to the service (REST inside a Jupyter server, the
`Experiments` otherwise), and shows the answer: a live widget where a frontend renders widgets,
plain text elsewhere.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.display import display

from kubelab.errors import KubelabError, NotFound
from kubelab.magics import connection, options, train, views


def friendly(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: KubelabMagics, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except KubelabError as exc:
            # a refusal (validation, not found...): shown like an option error, without a traceback
            raise UsageError(f"kubelab: {exc.message()}") from None

    return wrapper


class TensorBoardView:
    def __init__(self, session: dict[str, Any], url: str, height: int) -> None:
        self.session, self.url, self.height = session, url, height

    def __repr__(self) -> str:
        runs = ", ".join(self.session.get("logdirs", {}))
        return f"TensorBoard {self.session['id']} ({self.session['state']}): {self.url}\n  runs: {runs}"

    def _repr_html_(self) -> str:
        return views.tensorboard_html(self.session, self.session["url"], self.height)


@magics_class
class KubelabMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._service: Any = None

    @property
    def service(self) -> Any:
        if self._service is None:
            self._service = connection.connect()
        return self._service

    def widgets(self) -> bool:
        from kubelab.magics.widgets import widgets_available

        return widgets_available(self.shell)

    # -- %%train / %train -f ---------------------------------------------------------------
    @line_cell_magic
    @friendly
    def train(self, line: str, cell: str | None = None) -> None:
        """%%train [--name N] [--gpus N] ... [--wait|--detach] [--tensorboard] [--sweep SPACE ...]
        runs the cell as an experiment (or a sweep); %train -f spec.yaml runs a spec file."""
        parser = options.train_parser()
        args = parser.read(line)
        if args is None:
            return
        options.check_train(parser, args, cell=cell is not None)
        cwd = Path.cwd()
        if cell is not None and args.sweep:
            user_ns = self.shell.user_ns if self.shell is not None else {}
            spec = train.sweep_from_cell(args, cell, cwd, user_ns)
            self.present_sweep(self.service.submit_sweep(spec, base_dir=cwd), args)
            return
        if cell is not None:
            spec, base = train.experiment_from_cell(args, cell, cwd), cwd
        else:
            if args.sweep:
                parser.error("--sweep runs the cell as trials; for a sweep file use %sweep -f")
            spec, base = train.experiment_from_file(args)
        self.present_experiment(self.service.submit(spec, base_dir=base), args)

    def present_experiment(self, record: dict[str, Any], args: Any) -> None:
        svc = self.service
        if args.detach or not self.widgets():
            print(f"submitted {record['id']} ({record['name']}): {record['status']}", flush=True)
            if args.tensorboard:
                print(repr(self.open_tensorboard({"experiments": [record["id"]]}, 640)), flush=True)
        else:
            from kubelab.magics.widgets import ExperimentWidget, Live

            widget = ExperimentWidget(svc, record)
            display(widget)
            Live.of(svc).watch(widget)
            if args.tensorboard:
                widget.tensorboard_when_reported()
        if not args.wait:
            return
        if not self.widgets():
            for chunk in svc.logs(record["id"], 0, follow=True):
                sys.stdout.write(chunk)
                sys.stdout.flush()
        final = connection.wait_until_done(svc, record["id"])
        print(views.experiment_text(final), flush=True)

    # -- sweeps ----------------------------------------------------------------------------
    @line_magic
    @friendly
    def sweep(self, line: str) -> None:
        """%sweep -f config.yml [--wait|--detach]: a kubelab sweep file or an NNI config."""
        args = options.sweep_parser().read(line)
        if args is None:
            return
        spec, base = train.sweep_from_file(args.file)
        args.tensorboard = False
        self.present_sweep(self.service.submit_sweep(spec, base_dir=base), args)

    def present_sweep(self, record: dict[str, Any], args: Any) -> None:
        svc = self.service
        if args.detach or not self.widgets():
            print(
                f"submitted sweep {record['id']} ({record.get('name', '')}): {record.get('status')}",
                flush=True,
            )
        else:
            from kubelab.magics.widgets import Live, SweepWidget

            widget = SweepWidget(svc, record)
            display(widget)
            Live.of(svc).watch(widget)
        if args.wait:
            final = connection.wait_for_sweep(svc, record["id"])
            print(views.sweep_text(final), flush=True)

    # -- pipelines (magics/pipeline.py) ------------------------------------------------------
    @line_magic
    @friendly
    def pipeline(self, line: str) -> None:
        """%pipeline -f spec.yml [-P k=v] [--now] [--wait|--detach], or %pipeline ID: a live graph."""
        from kubelab.magics import pipeline

        pipeline.run(self, line)

    # -- services (magics/serve.py) -----------------------------------------------------------
    @line_magic
    @friendly
    def serve(self, line: str) -> None:
        """%serve RUN --model outputs/model.joblib | --predictor module:Class | -- COMMAND: a service."""
        from kubelab.magics import serve

        serve.run(self, line)

    # -- looking ---------------------------------------------------------------------------
    @line_magic
    @friendly
    def experiments(self, line: str) -> None:
        """%experiments [PQL] [--sort S] [--limit N]: a table of experiments."""
        args = options.experiments_parser().read(line)
        if args is None:
            return
        items, total = self.service.list(" ".join(args.query), args.sort, args.limit)
        display(views.ExperimentsView(items, total))

    @line_magic
    @friendly
    def logs(self, line: str) -> None:
        """%logs ID [-f] [--replica N]: an experiment's output."""
        args = options.logs_parser().read(line)
        if args is None:
            return
        try:
            for chunk in self.service.logs(args.id, args.replica, follow=args.follow):
                sys.stdout.write(chunk)
                sys.stdout.flush()
        except KeyboardInterrupt:
            print("\n(stopped following)")

    @line_magic
    @friendly
    def stop(self, line: str) -> None:
        """%stop ID: stop an experiment or a sweep."""
        args = options.id_parser("stop", "Stop an experiment or a sweep.").read(line)
        if args is None:
            return
        if connection.find_kind(self.service, args.id) == "sweep":
            record = self.service.stop_sweep(args.id)
            print(f"stopping sweep {args.id}: {record.get('status')}")
        else:
            record = self.service.stop(args.id)
            print(f"stopping {args.id}: {record['status']}")

    @line_magic
    @friendly
    def gpus(self, line: str) -> None:
        """%gpus: GPUs free and in use, by type."""
        if options.MagicParser("gpus", "GPU availability.").read(line) is None:
            return
        display(views.GpusView(self.service.resources()))

    @line_magic
    @friendly
    def tensorboard(self, line: str) -> None:
        """%tensorboard ID...|SWEEP|--query Q|--project: TensorBoard under the cell."""
        parser = options.tensorboard_parser()
        args = parser.read(line)
        if args is None:
            return
        request = options.tensorboard_request(parser, args)
        display(self.open_tensorboard(request, args.height))  # HTML in a frontend, text elsewhere

    def open_tensorboard(self, request: dict[str, Any], height: int) -> TensorBoardView:
        try:
            session = self.service.tensorboard(request)
        except NotFound:
            ids = request.get("experiments") or []
            if len(ids) != 1:
                raise
            try:
                session = self.service.tensorboard({"sweep": ids[0]})
            except NotFound:
                raise NotFound(f"no experiment or sweep '{ids[0]}'", []) from None
        return TensorBoardView(session, self.service.page_url(session["url"]), height)
