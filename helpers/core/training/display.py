"""How the optimizers show themselves: their parameters, the model as one line.

scikit-learn's repr prints every parameter, and the model's is its protobuf
text (kilobytes for a real network, seconds to render as HTML after every
notebook cell ending in ``.fit(...)``). :class:`ModelSummaryRepr` shows
:func:`~helpers.core.model_graphs.onnx_graph.describe_model` in its place.
"""

from sklearn.base import BaseEstimator

from ..model_graphs.onnx_graph import describe_model


class _Summary(str):
    """A string shown without quotes in a repr."""

    def __repr__(self):
        return str(self)


class ModelSummaryRepr:
    """Mixin of the optimizers: a repr with the ``model_onnx`` parameter as one line.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> opt = OrtGradientForwardBackwardOptimizer(mlp_onnx(3, hidden=(4,)), max_iter=5)
    >>> opt  # doctest: +NORMALIZE_WHITESPACE
    OrtGradientForwardBackwardOptimizer(max_iter=5, model_onnx=ONNX model X[N,3] -> variable[N,1],
    4 float weights (21 values))
    """

    def __repr__(self, N_CHAR_MAX=700):
        shown = object.__new__(type(self))
        shown.__dict__.update(self.get_params(deep=False))
        shown.model_onnx = _Summary(describe_model(self.model_onnx))
        return BaseEstimator.__repr__(shown, N_CHAR_MAX)

    @property
    def _repr_html_(self):
        # scikit-learn's diagram renders every parameter's repr, the model's protobuf
        # text included: notebooks show the text repr instead
        raise AttributeError("_repr_html_")

    def _repr_mimebundle_(self, **kwargs):
        return {"text/plain": repr(self)}
