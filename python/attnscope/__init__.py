"""AttnScope from Python: the core's analyses on NumPy arrays (docs/python.md).

    import attnscope
    doc = attnscope.analyze(q, k, head=2, blocks=8)      # the document of `attnscope analyze --json`
    A = attnscope.matrix(q, k, mechanism="mhla")          # the N x N matrix, float64
    q = attnscope.load("acts.h5:/layers/0/q")             # a tensor, with its file's attributes

The functions call AttnScope's C++ core (no second implementation). Keyword options are the command
line's long options with ``_`` for ``-`` (``row_entropy=True`` is ``--row-entropy``, ``at={"h": 2}`` is
``--at h=2``, ``mechanism=["softmax", "mhla"]`` is ``--mechanism softmax,mhla``); the core's typed requests
check them with the command line's messages: ``ValueError``, ``TypeError``, ``FileNotFoundError``.
``q`` and ``k`` are arrays of any float or integer dtype in any layout the command line reads
(``layout="bnhd"``, ``at=...``), PyTorch tensors, anything with ``__array__``, or ``FILE[:NAME]``
references (then the result is byte for byte the command line's). The core computes without the GIL on
a worker thread; Ctrl+C cancels it (KeyboardInterrupt); ``progress=callable(fraction, stage)`` reports.

From the Debian packages, docs/NAME.md is /usr/share/doc/attnscope-doc/html/NAME.html (attnscope-doc), the
samples are in /usr/share/attnscope (attnscope-data), and figure() needs the desktop app (attnscope).
"""
import base64
import difflib
import functools
import html
import io
import inspect
import json
import os
import re
import textwrap

import numpy as np

from . import _attnscope as _core

__version__ = _core.__version__
__all__ = ["analyze", "matrix", "sweep", "load", "info", "aggregate", "depth", "figure", "batch", "Batch", "report",
           "Report", "Figure", "Tensor", "Document"]


class _OwnNames(type):
    """The class of Tensor and Document: help() and dir() of the class list what it adds, not the hundreds of names
    of ndarray or dict (they are all there, as ``help(numpy.ndarray)`` and ``help(dict)`` document them)."""

    def __dir__(cls):
        return sorted(set(vars(cls)) | set(getattr(cls, "_instance_names", ())))


class Tensor(np.ndarray, metaclass=_OwnNames):
    """A float64 array read by :func:`load`, with ``attrs`` (its file's attributes, which analyze and
    matrix take as defaults exactly as the command line takes them from the file), ``ref`` (the reference
    as given) and ``origin`` (the file's absolute path: a ``mixing`` or ``gates`` attribute naming a file or
    dataset is resolved against it, as the command line resolves it against the file)."""

    _instance_names = ("attrs", "ref", "origin")   # set per instance, listed by dir(Tensor) and help(Tensor)

    def __new__(cls, values, attrs=None, ref=None, origin=None):
        t = np.asarray(values).view(cls)
        t.attrs = dict(attrs or {})
        t.ref = ref
        t.origin = origin
        return t

    def __array_finalize__(self, obj):
        # A view or slice of a Tensor is a different tensor: its file's attributes no longer describe it.
        self.attrs = {}
        self.ref = None
        self.origin = None


def _array(x, role):
    """x as a NumPy array the core can read in place: the same buffer when its dtype and byte order allow."""
    if isinstance(x, np.ndarray):
        a = x
    elif hasattr(x, "detach") and hasattr(x, "numpy"):  # a PyTorch tensor (on any device, with or without grad)
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: float32 holds every bfloat16 exactly
            t = t.float()
        a = t.numpy()
    else:
        a = np.asarray(x)
    if a.dtype.kind not in "fiub" or (a.dtype.kind == "f" and a.dtype.itemsize not in (2, 4, 8)):
        if a.dtype.name != "bfloat16":
            raise ValueError(f"{role}: arrays of dtype {a.dtype} are not read "
                             "(float16, bfloat16, float32, float64 or an integer type)")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _tensor(x, role):
    if isinstance(x, (str, bytes, os.PathLike)):
        return os.fspath(x)
    a = _array(x, role)
    if isinstance(x, Tensor) and (x.attrs or x.origin):
        a = a.view(Tensor)
        a.attrs = x.attrs
        a.origin = x.origin
    return a


def _keywords(options):
    """The keyword arguments as (name, value) pairs for the core, which sets its typed requests from them
    (python/src/keywords.cpp): None is not given; NumPy scalars become Python numbers, a mixing matrix or the
    gates given as an array are lent like q and k; everything else goes as it is, checked there."""
    out = []
    for name, value in options.items():
        if value is None:
            continue
        if isinstance(value, np.generic):
            value = value.item()
        elif name in ("mixing", "gates") and not isinstance(value, (str, bytes, os.PathLike)):
            value = _array(value, name)
        out.append((name, value))
    return out


def _progress(progress):
    """progress is None or a callable(fraction, stage): anything else raises TypeError before any work."""
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: expected a callable (fraction, stage) or None, got {type(progress).__name__}")
    return progress


class Document(dict, metaclass=_OwnNames):
    """A document of the core (``attnscope analyze --json``, ``sweep --json``): a dict, with attribute access to
    its keys (``doc.results[0].effective_rank``, ``doc.input.n``), :meth:`to_pandas` and a compact table in a
    notebook. Keys that are dict methods (``items``, ``keys``, ``values``) are reached by ``doc["items"]``."""
    __slots__ = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, value in self.items():   # nested objects too, once: what is read is what is stored
            dict.__setitem__(self, key, _document(value))

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"this document has no {name!r} (its keys: {', '.join(map(str, self))})") from None

    def __dir__(self):
        return sorted(set(dir(dict)) | set(vars(Document)) | {k for k in self if isinstance(k, str) and k.isidentifier()})

    def rows(self):
        """One flat dict per mechanism (and per unit of an ``at=...all`` analysis): the unit's indices, N and d,
        the mechanism and its scalar measures, nested ones as ``group.key`` (``entropy.mean``,
        ``past_block.rank``); arrays (singular values, row entropies, the profile) and params are left out.
        A sweep's document: one row per point (mechanism, N, M, the count of draws and units, each measure's
        ``mean``, ``std``, ``ci_low``, ``ci_high`` as ``rank.mean`` ...)."""
        steps = dict.get(self, "depth")
        if isinstance(steps, list):   # a depth document
            out = []
            for step in steps:
                for r in step.get("results", []):
                    row = {"depth": step.get("depth"), "layer": step.get("layer"), "mechanism": r.get("mechanism")}
                    _flatten(r, "", row)
                    out.append(row)
            return out
        if "resamples" in self:   # an aggregate document (by group, or batch's aggregate.json of one)
            return self._group_rows("mechanisms")
        points = dict.get(self, "points")
        if isinstance(points, list):
            out = []
            for p in points:
                row = {"mechanism": p.get("mechanism")}
                _flatten(p, "", row)
                out.append(row)
            return out
        units = dict.get(self, "units")
        out = []
        for unit in (units if isinstance(units, list) else [self]):
            at = dict(unit.get("at", {}) or unit.get("input", {}).get("at", {}))
            where = {f"at.{axis}": index for axis, index in at.items()}
            inp = unit.get("input", {})
            for r in unit.get("results", []):
                row = dict(where, n=inp.get("n"), d=inp.get("d"))
                row["mechanism"] = r.get("mechanism")
                _flatten(r, "", row)
                out.append(row)
        return out

    def _group_rows(self, member):
        out = []
        groups = dict.get(self, "groups")
        for g in groups if isinstance(groups, list) else [self]:
            where = {f"group.{k}": v for k, v in (g.get("group") or {}).items()}
            for r in g.get(member, []):
                row = dict(where)
                row.update({k: v for k, v in r.items() if not isinstance(v, (dict, list))})
                out.append(row)
        return out

    def pairs(self):
        """An aggregate document's paired differences (mechanism A minus B on the same units), one row each with
        the group's fields as ``group.FIELD``: a pandas DataFrame."""
        import pandas as pd
        return pd.DataFrame(self._group_rows("pairs") if "resamples" in self else [])

    def to_pandas(self):
        """:meth:`rows` as a pandas DataFrame (pandas from Debian's python3-pandas), one row per mechanism."""
        import pandas as pd
        return pd.DataFrame(self.rows())

    def _repr_html_(self):
        rows = self.rows()
        if not rows:
            return None
        keys = [k for k in ("at.h", "at.l", "at.b", "mechanism", "rank", "effective_rank", "excess_effective_rank",
                            "entropy.mean", "entropy_below_baseline", "past_block.rank", "semiseparable_rank",
                            "retrieval_mass") if any(k in r for r in rows)]
        head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
        body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(k))}</td>" for k in keys) + "</tr>" for r in rows)
        inp = dict.get(self, "input", {})
        caption = html.escape(f"N = {inp.get('n')}, d = {inp.get('d')}") if inp else ""
        return (f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                + _spectrum_png(self))


def _document(value):
    if isinstance(value, dict) and not isinstance(value, Document):
        return Document(value)
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return [_document(v) for v in value]
    return value


def _flatten(value, prefix, row):
    for key, v in value.items():
        name = prefix + str(key)
        if key in ("mechanism", "params", "method", "warnings") and not prefix:
            continue
        if isinstance(v, dict):
            _flatten(v, name + ".", row)
        elif isinstance(v, (bool, int, float, str)) or v is None:
            row[name] = v


def _cell(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape("" if v is None else str(v))


def _spectrum_png(doc):
    """The singular values of each mechanism (log scale) as an inline PNG, when matplotlib is there."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except Exception:   # noqa: BLE001 (no matplotlib: the table alone)
        return ""
    results = [r for r in dict.get(doc, "results", []) if isinstance(r.get("singular_values"), np.ndarray)]
    if not results:
        return ""
    fig, ax = plt.subplots(figsize=(4.2, 2.4), dpi=80)
    for r in results:
        sv = r["singular_values"]
        ax.semilogy(np.arange(1, len(sv) + 1), np.maximum(sv, 1e-300), label=r["mechanism"])
    ax.set_xlabel("index")
    ax.set_ylabel("singular value")
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return '<img alt="singular values" src="data:image/png;base64,%s"/>' % base64.b64encode(buf.getvalue()).decode()


def _with_arrays(doc):
    """Singular values and row entropies as NumPy arrays (every result, of one unit or of several)."""
    for unit in doc.get("units", [doc]):
        for r in unit.get("results", []):
            for key in ("singular_values", "row_entropy"):
                if isinstance(r.get(key), list):
                    r[key] = np.array(r[key], dtype=np.float64)
    return Document(doc)


_TABLE = _core.option_table()   # the core's descriptors by group: (keyword, type, default, help, excludes, help_off)
# What the Python layer takes beyond the text the core reads (a dict of axes, an array lent to the core).
_ANNOTATION = {"at": "str | dict | None", "mixing": "str | array | None", "gates": "str | array | None"}
_GROUP_TITLES = {"selection": "Selection", "mechanism": "Mechanism options", "metrics": "Metric options",
                 "resources": "Resources", "sweep": "Sweep", "aggregate": "Aggregate", "depth": "Depth"}


# The command line's one selection switch that acts while its arguments are read (app/cli_options.cpp).
_ALLOW_VIRTUAL = ("allow_virtual", None, "bool | None",
                  "Read HDF5 virtual datasets whose sources all lie in the file's own folder (default: refused)")


def _keyword_help(text):
    """A descriptor's help as a Python user reads it: ``--kv-head`` becomes ``kv_head``."""
    return re.sub(r"--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_"), text)


# The option groups analyze() documents in full; the other calls that take them list their names only.
_SHARED = ("selection", "mechanism", "metrics", "resources")


def _with_options(*groups, extra=(), progress=True, brief=()):
    """Gives the decorated function the signature and the help of its options, generated from the core's
    descriptors (analysis/requests.h): each a keyword-only parameter with its default; `extra` are
    (name, default, annotation, help) rows the function adds before them. Groups also in `brief` are listed by
    name only (analyze() documents them), so help(attnscope) stays short. Unknown keywords raise TypeError."""

    def decorate(fn):
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_KEYWORD, p.KEYWORD_ONLY)]
        known = {p.name for p in params}   # q=..., k=... by name
        lines = []
        for name, default, annotation, text in extra:
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
            lines.append(f"    {name} : {annotation} = {default!r}\n        {text}")
            known.add(name)
        shared = []   # the brief groups, named in one paragraph
        for group in groups:
            if group in brief:
                names = [row[0] for row in _TABLE[group]]
                for name, annotation, default, *_ in _TABLE[group]:
                    params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                                    annotation=_ANNOTATION.get(name, annotation)))
                    known.add(name)
                shared.append(f"{_GROUP_TITLES[group].lower()}: {', '.join(names)}")
                continue
            lines.append(f"\n{_GROUP_TITLES[group]}:")
            for name, annotation, default, text, excludes, text_off in _TABLE[group]:
                annotation = _ANNOTATION.get(name, annotation)
                if text_off:   # an optional switch: True, False or None (the file's attribute)
                    text = f"True: {text[:1].lower()}{text[1:]}; False: {text_off[:1].lower()}{text_off[1:]}"
                params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                                annotation=annotation))
                known.add(name)
                also = f" Not with {', '.join(excludes)}." if excludes else ""
                lines.append(f"    {name} : {annotation} = {default!r}\n        {_keyword_help(text)}{also}")
        if shared:
            lines.append("\n" + textwrap.fill("As in help(attnscope.analyze): " + "; ".join(shared) + ".", width=100))
        if progress:
            params.append(inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=None,
                                            annotation="callable(fraction, stage) | None"))
            known.add("progress")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for name in kwargs:
                if name not in known:
                    close = difflib.get_close_matches(name.replace("-", "_"), sorted(known), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {name!r}{hint}")
            return fn(*args, **kwargs)

        wrapper.__signature__ = inspect.Signature(params)
        wrapper.__doc__ = (fn.__doc__ or "") + "\n\nOptions (None: not given, the file's attribute or the default " \
            "applies; docs/cli.md gives each in full):\n" + "\n".join(lines) + \
            ("\n\n    progress : callable(fraction, stage) | None = None\n        Called as the core reports progress."
             if progress else "")
        return wrapper

    return decorate


@_with_options("selection", "mechanism", "metrics", "resources",
               extra=(("mechanism", _core.default_mechanisms, "str | list",
                       "The mechanisms: a comma list or a list of " + ", ".join(_core.mechanism_names)),
                      ("metric", None, "str | list | None",
                       "Keep only these metrics of each result, each under its flat name (entropy_mean, effective_rank, "
                       "...; docs/cli.md, analyze metric); None: every metric"),
                      ("no_baseline", False, "bool",
                       "Skip the content-free baseline A0 and the fields that need it (baseline, excess_effective_rank, "
                       "entropy_below_baseline): half the dense work"),
                      _ALLOW_VIRTUAL))
def analyze(q, k, v=None, *, progress=None, **options):
    """The document of ``attnscope analyze --json`` (docs/cli.md) for queries q and keys k (and values v): a dict,
    with ``singular_values`` and ``row_entropy`` as NumPy arrays. q, k, v: arrays (any float or integer dtype,
    PyTorch tensors, :class:`Tensor` from :func:`load` with its file's attributes) or ``FILE[:NAME]`` references."""
    _progress(progress)
    text = _core.analyze(_tensor(q, "q"), _tensor(k, "k"), None if v is None else _tensor(v, "v"),
                         _keywords(options), progress)
    return _with_arrays(json.loads(text))


@_with_options("selection", "mechanism", "resources", extra=(_ALLOW_VIRTUAL,), brief=_SHARED)
def matrix(q, k, mechanism, *, progress=None, **options):
    """The N x N attention matrix of one mechanism as a float64 array (``attnscope matrix``)."""
    _progress(progress)
    values, _params, _input = _core.matrix(_tensor(q, "q"), _tensor(k, "k"),
                                           _keywords(dict(mechanism=mechanism, **options)), progress)
    return values


@_with_options("sweep", "selection", "mechanism", "metrics", "resources",
               extra=(("mechanism", _core.default_mechanisms, "str | list",
                       "The mechanisms: a comma list or a list of " + ", ".join(_core.mechanism_names)), _ALLOW_VIRTUAL),
               brief=_SHARED)
def sweep(q=None, k=None, *, progress=None, **options):
    """The document of ``attnscope sweep --json``: rank and entropy against N (``vary="n=64,128,256"``) or the
    blocks M (``vary="m=1,2,4"``). q and k: one input each or lists of them (arrays or ``FILE[:NAME]``
    references), or none with ``synth="gaussian"``."""
    _progress(progress)
    listed = (lambda x: [] if x is None else list(x) if isinstance(x, (list, tuple)) else [x])
    text = _core.sweep([_tensor(x, "q") for x in listed(q)], [_tensor(x, "k") for x in listed(k)],
                       _keywords(options), progress)
    return Document(json.loads(text))


@_with_options("selection", extra=(_ALLOW_VIRTUAL,), progress=False)
def load(ref, **selection):
    """The tensor ``FILE[:NAME]`` as a float64 :class:`Tensor` in its own shape; with selection options
    (``layout``, ``at``, ``head``, ``kv_head``, ``prefix_tokens``) the N x d slice the command line reads. With
    ``prefix_tokens=P`` the slice has P tokens fewer and ``attrs["prefix_tokens"]`` is 0 (``prefix_tokens_dropped``
    keeps P), so analysing it does not drop them twice."""
    opts = _keywords(selection)
    whole = not [name for name, _ in opts if name != "allow_virtual"]
    if whole:
        opts.append(("whole", True))
    values, attrs, origin = _core.load(os.fspath(ref), opts)
    attrs = json.loads(attrs)
    if not whole:
        # A slice: the file's per-token datasets (retrieval targets) index axes it no longer has.
        attrs["sliced_from"] = os.fspath(ref) if not isinstance(ref, bytes) else os.fsdecode(ref)
    if selection.get("prefix_tokens") is not None:
        # The slice has its prefix tokens dropped already: its attributes must not ask analyze() to drop them
        # again (the file's `prefix_tokens` describes the file, not this slice). What was dropped stays on record.
        attrs["prefix_tokens_dropped"] = int(selection["prefix_tokens"])
        attrs["prefix_tokens"] = 0
    return Tensor(values, attrs, os.fspath(ref), origin)


@_with_options("depth", "selection", "mechanism", "metrics", "resources",
               extra=(("mechanism", _core.default_mechanisms, "str | list",
                       "The mechanisms: a comma list or a list of " + ", ".join(_core.mechanism_names)), _ALLOW_VIRTUAL),
               brief=_SHARED)
def depth(file, *, progress=None, **options):
    """The document of ``attnscope depth --json``: collapse with depth over one file's layers, the products
    P_L = (alpha A_L + (1 - alpha) I) ... (alpha A_1 + (1 - alpha) I) with their rank, entropy and residual to a
    rank-one uniform matrix (docs/maths.md). ``to_pandas()`` gives one row per depth and mechanism."""
    _progress(progress)
    return Document(json.loads(_core.depth(os.fspath(file), _keywords(options), progress)))


@_with_options("aggregate", "resources", progress=False, brief=("resources",))
def aggregate(results_dir, **options):
    """The document of ``attnscope aggregate --json``: the statistics over the units of a batch folder (its
    results.jsonl), by group: each mechanism's mean of each metric with its 95% interval, and the paired
    differences with their tests (docs/maths.md 5). ``to_pandas()`` gives one row per group, mechanism and metric;
    ``pairs()`` the differences as rows."""
    return Document(json.loads(_core.aggregate(os.fspath(results_dir), _keywords(options))))


class Figure:
    """A figure rendered by ``attnscope figure``: ``data`` (the file's bytes) and ``format`` ("png", "svg" or
    "pdf"); shown inline in a notebook (PNG and SVG), ``save(path)`` writes it."""
    __slots__ = ("data", "format")

    def __init__(self, data, format):
        self.data, self.format = data, format

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.data)

    def _repr_png_(self):
        return self.data if self.format == "png" else None

    def _repr_svg_(self):
        return self.data.decode("utf-8") if self.format == "svg" else None

    def __repr__(self):
        return f"<attnscope.Figure {self.format}, {len(self.data)} bytes>"


def _executable():
    """The attnscope executable beside this module: $ATTNSCOPE_EXECUTABLE, the build tree's app/attnscope
    (build/python/attnscope -> build/app/attnscope), or attnscope on PATH (the Debian package's /usr/bin)."""
    import shutil
    given = os.environ.get("ATTNSCOPE_EXECUTABLE")
    if given:
        return given
    built = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "app", "attnscope")
    if os.path.isfile(built) and os.access(built, os.X_OK):
        return built
    found = shutil.which("attnscope")
    if not found:
        raise FileNotFoundError("figure() runs the attnscope executable (the desktop build): none beside the module "
                                "and none on PATH; set ATTNSCOPE_EXECUTABLE")
    return found


def _flag_args(options):
    """Keyword options as the command line's flags (the figure subcommand is the desktop build's: it renders
    with Qt, which this module does not link)."""
    args = []
    for name, value in options.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, (bool, np.bool_)):
            args.append(flag if value else "--no-" + name.replace("_", "-"))
            continue
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, dict):
            value = ",".join(f"{a}={i}" for a, i in value.items())
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, float):
            value = repr(value)
        args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


def figure(view, q=None, k=None, v=None, *, format="png", out=None, **options):
    """A view of the desktop app rendered headless (``attnscope figure``): ``view`` is maps, query, spectrum,
    entropy, mixing, metrics, heads, depth, curves or overview; q, k (and v) ``FILE[:NAME]`` references or arrays
    (written to a temporary .npy file; a :class:`Tensor`'s causal, prefix_tokens, grid, block_grid and token_order
    attributes become options unless given). ``format``: png, svg or pdf; ``out``: also write the file there. Options: those of
    ``attnscope figure --help`` as keywords (``width=800``, ``log=True``, ``blocks=16``, ``vary="n=64,128"``).
    Returns a :class:`Figure` (inline in a notebook). Runs the attnscope executable: the figures are the
    command line's, byte for byte; its ``error:`` line raises ValueError."""
    import subprocess
    import tempfile
    if format not in ("png", "svg", "pdf"):
        raise ValueError(f"format {format!r}: png, svg or pdf")
    with tempfile.TemporaryDirectory(prefix="attnscope-figure-") as tmp:
        args = [_executable(), "figure", "--view", str(view)]
        for role, x in (("q", q), ("k", k), ("v", v)):
            if x is None:
                continue
            if isinstance(x, (str, bytes, os.PathLike)):
                args += ["--" + role, os.fsdecode(x)]
            else:
                path = os.path.join(tmp, role + ".npy")
                np.save(path, _array(x, role))
                args += ["--" + role, path]
                # A Tensor's file attributes the figure's options depend on, unless given (a .npy holds none).
                attrs = getattr(x, "attrs", None) or {}
                for key in ("causal", "prefix_tokens", "grid", "block_grid", "token_order"):
                    if key in attrs and options.get(key) is None and role == "q":
                        options[key] = bool(attrs[key]) if key == "causal" else attrs[key]
        target = os.path.join(tmp, "figure." + format)
        args += ["--out", target] + _flag_args(options)
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            lines = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
            message = lines[-1][len("error: "):] if lines else p.stderr.strip()
            # The option at the start of the message named as a keyword, as the module's other messages name it.
            message = re.sub(r"^--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_"), message)
            raise ValueError(message)
        with open(target, "rb") as f:
            data = f.read()
    fig = Figure(data, format)
    if out is not None:
        fig.save(out)
    return fig


def _run_units(args, progress):
    """Runs the attnscope executable (batch, report) and returns its standard error's lines, calling
    ``progress(fraction, unit)`` on each "progress 3/4 (75%) eta 3s: FILE|l=-|h=0 2.07s" line; its ``error:`` line
    raises ValueError."""
    import subprocess
    with subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as p:
        lines = []
        for line in p.stderr:
            lines.append(line.rstrip("\n"))
            m = re.match(r"progress (\d+)/(\d+) \(\d+%\)[^:]*: (\S+)", line)
            if m and progress is not None:
                progress(int(m.group(1)) / max(int(m.group(2)), 1), m.group(3))
    if p.returncode != 0:
        errors = [line for line in lines if line.startswith("error: ")]
        raise ValueError(errors[-1][len("error: "):] if errors else "\n".join(lines))
    return lines


class Batch:
    """The folder ``attnscope batch`` wrote (docs/batch.md): ``out`` (its path), ``records`` (results.jsonl: one dict
    per unit and mechanism), ``aggregate`` (aggregate.json, a :class:`Document`), ``figures`` (their paths)."""
    __slots__ = ("out", "records", "aggregate", "figures")

    def __init__(self, out):
        self.out = out
        with open(os.path.join(out, "results.jsonl")) as f:
            self.records = [Document(json.loads(line)) for line in f if line.strip()]
        path = os.path.join(out, "aggregate.json")
        self.aggregate = None
        if os.path.exists(path):
            with open(path) as f:
                self.aggregate = Document(json.load(f))
        folder = os.path.join(out, "figures")
        self.figures = sorted(os.path.join(folder, n) for n in os.listdir(folder)) if os.path.isdir(folder) else []

    def to_pandas(self):
        """summary.csv as a pandas DataFrame: one row per unit (file, layer, head) and mechanism."""
        import pandas as pd
        return pd.read_csv(os.path.join(self.out, "summary.csv"))



def batch(job, out=None, *, jobs=1, shard=None, progress=None):
    """Runs a TOML job (docs/batch.md) as ``attnscope batch JOB --out OUT --jobs N [--shard I/N]`` does, and returns
    a :class:`Batch` of OUT (default: ``<job name>_results`` in the working folder). Resumable: a rerun keeps the units
    recorded. Runs the attnscope executable (the job's figures are drawn with Qt, which this module does not link);
    ``progress(fraction, unit)`` follows its units; its ``error:`` line raises ValueError."""
    job = os.fspath(job)
    if not os.path.isfile(job):
        raise FileNotFoundError(f"{job}: no such job file")
    _progress(progress)
    args = [_executable(), "batch", job, "--jobs", str(int(jobs))]
    if out is not None:
        args += ["--out", os.fspath(out)]
    if shard is not None:
        args += ["--shard", str(shard)]
    lines = _run_units(args, progress)
    done = [m.group(1) for m in (re.match(r"batch .*-> (.+)$", line) for line in lines) if m]
    if progress is not None:
        progress(1.0, "done")
    return Batch(os.fspath(out) if out is not None else done[-1])


class Report:
    """The folder ``attnscope report`` wrote (docs/cli.md, report): ``out``, ``index`` (the page's path, open it in
    any browser), ``data`` (the page's data, data.js, as a :class:`Document`: ``data.inputs[0].units[0].mechanisms``)
    and ``runs`` (each input's :class:`Batch` by name)."""
    __slots__ = ("out", "index", "data", "runs")

    def __init__(self, out):
        self.out = out
        self.index = os.path.join(out, "index.html")
        with open(os.path.join(out, "data.js")) as f:
            text = f.read()
        data = json.loads(text[len("window.ATTNSCOPE_REPORT = "):].rstrip().rstrip(";"))
        # A report paged by layer keeps each head's curves in its layer's data file: put them back.
        for inp in data["inputs"]:
            for page in inp.get("pages", []):
                script = os.path.join(out, page["page"][:-len(".html")] + ".js")
                with open(script) as f:
                    text = f.read()
                layer = json.loads(text[len("window.ATTNSCOPE_LAYER = "):].rstrip().rstrip(";"))
                full = {(u["layer"], u["head"]): u for u in layer["units"]}
                inp["units"] = [dict(full.get((u["layer"], u["head"]), u), page=u["page"]) if "page" in u else u
                                for u in inp["units"]]
        self.data = Document(data)
        self.runs = {i["name"]: Batch(os.path.join(out, "runs", i["name"])) for i in self.data["inputs"]}

    def to_pandas(self):
        """One row per input, layer, head and mechanism with the page's scalar measures."""
        import pandas as pd
        rows = []
        for inp in self.data["inputs"]:
            for u in inp["units"]:
                for m in u["mechanisms"]:
                    row = {"input": inp["name"], "layer": u["layer"], "head": u["head"]}
                    row.update({k: v for k, v in m.items() if not isinstance(v, (list, dict))})
                    rows.append(row)
        return pd.DataFrame(rows)

    def _repr_html_(self):
        return f'<a href="{self.index}">{self.index}</a>'


def report(*inputs, out, jobs=1, title=None, pages=None, progress=None):
    """Writes the page of ``attnscope report INPUT... --out OUT`` (every layer and head of every input, offline) and
    returns its :class:`Report`. Runs the attnscope executable (the maps are drawn with Qt; without the desktop app
    the page has no maps); ``pages`` is ``--pages``: "single", "layer" or "auto" (None: the executable's default,
    auto: one page per layer for large models). A missing input raises FileNotFoundError, the executable's
    ``error:`` line ValueError; ``progress(fraction, unit)`` follows each input's units (the fraction is per input)."""
    paths = [os.fspath(i) for i in inputs]
    if not paths:
        raise TypeError("report() needs at least one input file")
    for p in paths:
        if not os.path.isfile(p):
            raise FileNotFoundError(f"{p}: no such file")
    _progress(progress)
    args = [_executable(), "report", *paths, "--out", os.fspath(out), "--jobs", str(int(jobs))]
    if title is not None:
        args += ["--title", str(title)]
    if pages is not None:
        args += ["--pages", str(pages)]
    _run_units(args, progress)
    if progress is not None:
        progress(1.0, "done")
    return Report(os.fspath(out))


def info(path):
    """The document of ``attnscope info --json``: every tensor in the file (name, shape, dtype, attributes)."""
    return json.loads(_core.info(os.fspath(path)))
