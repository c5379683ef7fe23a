"""Registries and objects shown by what they hold, not by their repr.

A Sphinx extension of this project's docs (``extensions`` in ``docs/conf.py``). A
module-level dict of classes (a registry) lists its names and what each one is; data
whose value is a repr (``<... object at 0x...>``) loses autodoc's ``= value``.
"""

import importlib
import inspect
import re
from collections.abc import Mapping

from sphinx import addnodes


def _is_plain(value):
    return value is None or isinstance(value, (str, int, float, bool))


def _literal(value, width=70):
    text = repr(value)
    return f"``{text if len(text) <= width else text[: width - 1] + '…'}``"


def _value_description(value):
    """``(hide, lines)``: whether autodoc's ``= value`` should go, and what to show instead."""
    text = repr(value)
    if isinstance(value, Mapping):
        lines = []
        for key, item in value.items():
            if inspect.isclass(item) or inspect.isfunction(item):
                where = f"{item.__module__}.{item.__qualname__}"
                shown = (
                    f":py:obj:`~{where}`"
                    if where.startswith("helpers.")
                    else f"``{where.replace('numpy.', 'np.')}``"
                )
            elif _is_plain(item) or isinstance(item, (tuple, Mapping)):
                shown = _literal(item)
            else:
                shown = f"a ``{type(item).__name__}``"
            lines.append(f"* {_literal(key)}: {shown}")
        return True, [
            "",
            "**Names it accepts:**" if all(isinstance(k, str) for k in value) else "**Keys:**",
            "",
        ] + lines
    if re.search(r"<[\w.]+ object( at 0x[0-9a-f]+)?>|<(class|function|built-in)", text):
        return True, []
    if isinstance(value, (tuple, list)) and len(text) > 90:
        return True, ["", "**Values:**", ""] + [f"* {_literal(item, 90)}" for item in value]
    return False, []


def _registry_docstring(app, what, name, obj, options, lines):
    if what in ("data", "attribute"):
        hide, extra = _value_description(obj)
        written = "\n".join(lines)
        if isinstance(obj, Mapping) and all(f"``{k!r}``" in written for k in obj):
            return  # its comment already names every key
        if hide and extra:
            lines.extend(extra)


def _resolve(module, fullname):
    if not module or not fullname:
        return None, False
    try:
        obj = importlib.import_module(module)
        for part in fullname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError):
        return None, False
    return obj, True


def _drop_reprs(app, doctree):
    """Remove ``= value`` from the signature of data whose value is a repr, not a literal."""
    for desc in doctree.findall(addnodes.desc):
        if desc.get("domain") != "py" or desc.get("objtype") not in ("data", "attribute"):
            continue
        for signature in desc.findall(addnodes.desc_signature):
            obj, found = _resolve(signature.get("module") or "", signature.get("fullname", ""))
            if not found or not _value_description(obj)[0]:
                continue
            for annotation in list(signature.findall(addnodes.desc_annotation)):
                if any(
                    p.astext() == "=" for p in annotation.findall(addnodes.desc_sig_punctuation)
                ):
                    annotation.parent.remove(annotation)


def setup(app):
    app.connect("autodoc-process-docstring", _registry_docstring)
    app.connect("doctree-read", _drop_reprs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
