"""MLServer's runtime for `predictor: module:Class`, a user's plain Python class.

The class needs no MLServer knowledge: `Class()` is made once, `load(path)` (or `load()` when
the service names no model file) loads the model, and `predict(inputs)` answers with anything
NumPy can turn into an array. `inputs` is one array when the request has one input, else a
mapping of input names to arrays. Requests and answers are MLServer's, so the protocol (and its
4xx for a malformed request) is the library's. Imported only inside a replica.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse


class PredictorModel(MLModel):  # type: ignore[misc]  # MLServer ships no type information
    async def load(self) -> bool:
        parameters = self.settings.parameters
        module_name, _, class_name = str(parameters.extra["predictor"]).partition(":")
        predictor_class = getattr(importlib.import_module(module_name), class_name)
        self._predictor = predictor_class()
        load = getattr(self._predictor, "load", None)
        if load is not None:
            takes_path = len(inspect.signature(load).parameters) > 0
            result = load(parameters.uri) if takes_path else load()
            if inspect.isawaitable(result):
                await result
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        if not payload.inputs:
            raise InferenceError("the request has no inputs")
        arrays = {item.name: NumpyCodec.decode_input(item) for item in payload.inputs}
        inputs: Any = next(iter(arrays.values())) if len(arrays) == 1 else arrays
        result = self._predictor.predict(inputs)
        if inspect.isawaitable(result):
            result = await result
        output = NumpyCodec.encode_output("predict", np.asarray(result))
        return InferenceResponse(model_name=self.name, model_version=self.version, outputs=[output])
