"""Where the runtime helpers lived before the code was organised in packages.

Scripts written against ``helpers.runtime`` (the project's step-time scripts
call ``helpers.runtime.set_num_threads``) keep working: the names are those
of :mod:`helpers.core.sessions` and :mod:`helpers.core.runtime`. Importing
this module warns; new code imports from those two modules, or
``helpers.set_num_threads``.
"""
import warnings

from .core.runtime import (  # noqa: F401  (the names the old module had)
    RuntimeCompatibilityError,
    UntrainableModelError,
    check_model_ir_version,
    check_onnx_compatible,
    explain_untrainable,
    main_opset,
    max_ir_version,
    native_stderr_captured,
    quiet_runtime_logs,
    untrainable_operators,
)
from .core.sessions import (  # noqa: F401
    check_n_threads,
    is_profiling,
    profiling_sessions,
    resolved_threads,
    session_options,
    set_num_threads,
)

warnings.warn(
    "helpers.runtime moved to helpers.core.sessions (threads, sessions) and helpers.core.runtime "
    "(checks, errors); set_num_threads is also helpers.set_num_threads.",
    DeprecationWarning,
    stacklevel=2,
)
