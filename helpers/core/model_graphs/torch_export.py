"""Deprecated: this module is now :mod:`helpers.core.model_graphs.from_torch`.

``from helpers.core.model_graphs.torch_export import export_for_training`` is the former
import path: it, and the imports of the module's other names, are kept for one release with a
``DeprecationWarning`` naming the import to write instead (``from helpers import
export_for_training``).
"""

from ...portable.module_names import moved_names

_HOME = "helpers.core.model_graphs.from_torch"

__getattr__ = moved_names(
    __name__,
    {
        "export_for_training": ("helpers", _HOME),
        **{
            name: (_HOME, _HOME)
            for name in (
                "DEFAULT_OPSET",
                "BatchStatisticsNorm",
                "batch_statistics_swapped",
                "buffers_kept",
                "export_errors_named",
            )
        },
    },
)
