"""How both spawners answer JupyterHub's form hooks: render the form, then validate and admit.

JupyterHub calls `options_form` to render and `options_from_form` to turn the posted fields
into `user_options`. Each spawner says how it renders (`_render_form`) and how it chooses and
admits (`_admit`); the refusal and the result's shape are the same for both.
"""

from __future__ import annotations

from typing import Any

from tornado import web
from traitlets import HasTraits, default

from kubelab.errors import KubelabError

from .form import options_from_form
from .profiles import NotebookOptions


def refusal(exc: KubelabError) -> web.HTTPError:
    """A 400 whose text JupyterHub shows as is above the form (and in the REST API's answer)."""
    error = web.HTTPError(400, "%s", exc.message())
    error.jupyterhub_message = exc.message()  # type: ignore[attr-defined]
    return error


class SpawnForm(HasTraits):
    """Mixed into a Spawner, before it, so these defaults win (a HasTraits, so traitlets sees them)."""

    @default("options_form")
    def _default_options_form(self) -> Any:
        return self._render_form

    @default("options_from_form")
    def _default_options_from_form(self) -> Any:
        return self._admit_form

    async def _render_form(self, spawner: Any = None) -> str:
        raise NotImplementedError

    async def _admit(self, raw: dict[str, Any]) -> NotebookOptions:
        """The user's choice, validated against the catalog and groups and admitted, or raise."""
        raise NotImplementedError

    async def _admit_form(self, formdata: dict[str, list[str]]) -> dict[str, Any]:
        """Validate and admit here, so a refusal shows above the form before anything exists.
        (Not named `_options_from_form`: that is KubeSpawner's own parser, which it keeps.)"""
        try:
            options = await self._admit(options_from_form(formdata))
        except KubelabError as exc:
            raise refusal(exc) from None
        result = options.to_user_options()
        if options.profile:
            result["profile"] = options.profile
        return result
