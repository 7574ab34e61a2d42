"""lshbench: MinHash signatures, LSH banding and near-duplicate detection from Python.

The Rust library under the ``lshbench`` command-line tool, over numpy and Arrow: texts go in as a pyarrow
string column (read in place from its buffers), a list of ``str`` or a numpy array of ``str``; signatures come
out as a numpy ``uint32`` matrix with the same bytes as ``lshbench sketch``; dedup results come out as pyarrow
Tables with the columns of ``lshbench dedup``'s CSV files.

Every long call releases the GIL and runs on ``threads`` worker threads (default: every logical CPU); the
results do not depend on the thread count or on the instruction set. Bad arguments raise ``ValueError`` (or
``TypeError`` for a wrong type) with the command-line tool's messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence, Tuple

import numpy as np

from . import _lshbench
from ._lshbench import DEFAULTS, __version__, isas, kernels
from .client import Client, ServerError

# The defaults every front end shares (the Rust table lshbench_core::defaults): the CLI's flags, the service's
# parameters and these signatures all read them, so the same call gives the same bytes everywhere.
_D = DEFAULTS

__all__ = [
    "Client",
    "DEFAULTS",
    "DedupResult",
    "LSHIndex",
    "ServerError",
    "__version__",
    "band_keys",
    "dedup",
    "estimate",
    "estimate_pairs",
    "isas",
    "jaccard",
    "jaccard_pairs",
    "kernels",
    "scurve",
    "sketch",
    "tune",
]


def _texts(texts: Any) -> Any:
    """Arrow columns and lists pass through; a numpy array of str becomes a list (one Python str per row)."""
    if isinstance(texts, np.ndarray):
        if texts.ndim != 1:
            raise ValueError(f"texts: a numpy array of shape {texts.shape}; expected one dimension")
        if texts.dtype.kind not in "UO":
            raise TypeError(f"texts: a numpy array of dtype {texts.dtype}; expected str")
        return texts.tolist()
    return texts


def _count(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}" if minimum else f"{name} must not be negative")
    return int(value)


def _threads(threads: Optional[int]) -> Optional[int]:
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"threads must be an int or None, not {type(threads).__name__}")
    if threads < 1:
        raise ValueError("--threads must be at least 1")
    return int(threads)


def sketch(
    texts: Any,
    *,
    kernel: str = _D["kernel"],
    num_perm: int = _D["num_perm"],
    seed: int = _D["seed"],
    shingle: str = _D["shingle"],
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    isa: Optional[str] = None,
    threads: Optional[int] = None,
) -> np.ndarray:
    """MinHash signatures of ``texts``: a numpy ``uint32`` array of shape ``(len(texts), num_perm)``.

    The same bytes as ``lshbench sketch --kernel KERNEL --num-perm K --seed S --shingle SHINGLE`` (plus the
    normalisation flags) writes to ``.npy`` for the same texts. An empty document's row is all ``2**32 - 1``.

    texts: a pyarrow ``StringArray``, ``LargeStringArray``, ``StringViewArray`` or ``ChunkedArray`` of them
        (read in place, no Python object per row; any object with ``__arrow_c_array__`` or
        ``__arrow_c_stream__``, e.g. a Polars Series, works too), a list of ``str``, or a numpy array of ``str``.
        A null value raises ``ValueError``.
    kernel: a registry name (``lshbench.kernels()``): scalar, simd, oph-opt, oph-rot, fss.
    num_perm: k, slots per signature (at least 1).
    seed: seed of the kernel's hash functions and of the shingle hash.
    shingle: ``char:K``, ``byte:K``, ``word:N`` or ``stopword:N``.
    lowercase, collapse_whitespace, strip_punctuation: opt-in normalisation before shingling.
    isa: ``None``/``"auto"`` (the widest this CPU runs), ``scalar``, ``portable``, ``avx2``, ``avx512``; every
        choice gives the same bytes.
    threads: worker threads (``None``: every logical CPU). The GIL is released while signing.
    """
    return _lshbench.sketch(
        _texts(texts),
        kernel,
        _count("num_perm", num_perm),
        _count("seed", seed),
        shingle,
        bool(lowercase),
        bool(collapse_whitespace),
        bool(strip_punctuation),
        isa,
        _threads(threads),
    )


def _signatures(signatures: Any) -> np.ndarray:
    sigs = np.asarray(signatures)
    if sigs.ndim != 2:
        raise ValueError(f"signatures must be a 2-d array (n, num_perm), not shape {sigs.shape}")
    if sigs.dtype != np.uint32:
        raise TypeError(f"signatures must be uint32 (as sketch returns), not {sigs.dtype}")
    return np.ascontiguousarray(sigs)


def _pairs(pairs: Any) -> np.ndarray:
    p = np.asarray(pairs)
    if p.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"pairs must have shape (m, 2), not {p.shape}")
    if p.dtype.kind not in "iu":
        raise TypeError(f"pairs must hold integer positions, not {p.dtype}")
    return np.ascontiguousarray(p, dtype=np.int64)


def band_keys(signatures: Any, bands: int, rows: int, *, seed: int = _D["seed"]) -> np.ndarray:
    """The LSH band keys of each signature: a numpy ``uint64`` array of shape ``(n, bands)``.

    Band ``i`` of a signature is its slots ``i*rows .. (i+1)*rows``, hashed with the seeded xxh3 that
    ``lshbench dedup`` bands with (for the kernel seed ``seed``). Two documents are candidates exactly when they
    share a key in some column: group a dataframe by each column to get the candidate pairs.
    """
    return _lshbench.band_keys(
        _signatures(signatures), _count("bands", bands), _count("rows", rows), _count("seed", seed)
    )


def estimate(sig_a: Any, sig_b: Any, *, kernel: str = _D["kernel"], seed: int = _D["seed"]) -> float:
    """The Jaccard estimate of two signatures made by ``kernel`` (the fraction of equal slots)."""
    a = np.ascontiguousarray(sig_a, dtype=np.uint32)
    b = np.ascontiguousarray(sig_b, dtype=np.uint32)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError("estimate takes two 1-d signatures; use estimate_pairs for many")
    return _lshbench.estimate(a, b, kernel, _count("seed", seed))


def estimate_pairs(
    signatures: Any, pairs: Any, *, kernel: str = _D["kernel"], seed: int = _D["seed"], threads: Optional[int] = None
) -> np.ndarray:
    """Jaccard estimates of the rows ``pairs[:, 0]`` and ``pairs[:, 1]`` of ``signatures``: float64 ``(m,)``."""
    return _lshbench.estimate_pairs(
        _signatures(signatures), _pairs(pairs), kernel, _count("seed", seed), _threads(threads)
    )


def jaccard(
    text_a: str,
    text_b: str,
    *,
    shingle: str = _D["shingle"],
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    seed: int = _D["seed"],
) -> float:
    """Exact Jaccard similarity of the shingle sets of two texts (what ``lshbench exact`` computes)."""
    if not isinstance(text_a, str) or not isinstance(text_b, str):
        raise TypeError("jaccard takes two str; use jaccard_pairs for many")
    return _lshbench.jaccard(
        text_a, text_b, shingle, bool(lowercase), bool(collapse_whitespace), bool(strip_punctuation),
        _count("seed", seed),
    )


def jaccard_pairs(
    texts: Any,
    pairs: Any,
    *,
    shingle: str = _D["shingle"],
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    seed: int = _D["seed"],
    threads: Optional[int] = None,
) -> np.ndarray:
    """Exact Jaccard of the texts at ``pairs[:, 0]`` and ``pairs[:, 1]``: float64 ``(m,)``."""
    return _lshbench.jaccard_pairs(
        _texts(texts), _pairs(pairs), shingle, bool(lowercase), bool(collapse_whitespace),
        bool(strip_punctuation), _count("seed", seed), _threads(threads),
    )


def scurve(bands: int, rows: int, s: Any) -> Any:
    """P(two documents of Jaccard similarity ``s`` become candidates) = 1 - (1 - s**rows)**bands.

    ``s`` may be a float (returns a float) or an array of floats (returns a float64 array of its shape).
    """
    b, r = _count("bands", bands), _count("rows", rows)
    if np.ndim(s) == 0:
        return _lshbench.scurve(b, r, float(s))
    arr = np.asarray(s, dtype=np.float64)
    return np.array([_lshbench.scurve(b, r, float(x)) for x in arr.ravel()]).reshape(arr.shape)


def tune(
    num_perm: int,
    fn: Tuple[float, float] = (0.5, 0.01),
    fp: Tuple[float, float] = (0.05, 0.001),
) -> dict:
    """Which (bands, rows) for a ``num_perm``-slot signature: ``lshbench tune --num-perm K --fn S:P --fp S:P``.

    ``fn=(s_hi, max_fn)``: pairs of similarity ``s_hi`` are missed with probability at most ``max_fn``;
    ``fp=(s_lo, max_fp)``: pairs of similarity ``s_lo`` become candidates with probability at most ``max_fp``.
    Returns a dict: ``choice`` (bands, rows, p_recall = P(s_hi), p_fp = P(s_lo), rule_of_thumb, steepest),
    ``feasible`` (whether some banding meets both targets), ``meets_recall``, ``table`` (the feasible bandings,
    fewest false positives first, or the Pareto front when none is feasible) and ``report`` (the CLI's text).
    """
    (s_hi, p_fn), (s_lo, p_fp) = fn, fp
    return _lshbench.tune(_count("num_perm", num_perm), float(s_hi), float(p_fn), float(s_lo), float(p_fp))


_POLICIES = ("center", "first", "last", "longest", "shortest")


@dataclass(frozen=True)
class DedupResult:
    """What :func:`dedup` returns. It unpacks as ``pairs, clusters = dedup(...)``, the two tables every call has
    returned; the survivors are the other fields.

    ``pairs``: ``id_a, id_b, estimate, jaccard, verified_by``, one row per verified pair (``jaccard`` null unless
    verified exactly). ``clusters``: ``group, id, size, center, is_center, similarity_to_center``, one row per
    member of each group of two or more documents; the centre is the survivor. ``removed``: ``id, survivor,
    similarity, basis, group, rule``, one row per removed document in input order (``lshbench dedup
    --removed``). ``mask``: a numpy bool array, one per text, true for the documents kept (false exactly for the
    ids in ``removed``). ``kept``: the input Table filtered by ``mask``, every column kept (``None`` unless
    ``texts`` was a Table).
    """

    pairs: Any
    clusters: Any
    removed: Any
    mask: np.ndarray
    kept: Any = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.pairs, self.clusters))


def _rank_values(values: Any) -> Any:
    """Survivor values as the binding takes them: an Arrow array of float64, strings or nulls, or a sequence.

    Numeric and decimal arrays become float64; dates, timestamps and durations their integer value in their
    unit (as the CLI reads such a Parquet column); a numpy array of str or objects becomes a list.
    """
    import pyarrow as pa

    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"keep_values: a numpy array of shape {values.shape}; expected one dimension")
        kind = values.dtype.kind
        if kind in "iuf":
            return pa.array(values.astype(np.float64))
        if kind in "mM":
            numbers = values.view(np.int64).astype(np.float64)
            numbers[np.isnat(values)] = np.nan
            return pa.array(numbers)
        if kind in "UO":
            return values.tolist()
        raise TypeError(f"keep_values: a numpy array of dtype {values.dtype}; expected numbers or str")
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        t = values.type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            return values.cast(pa.float64())
        if pa.types.is_temporal(t):
            width = pa.int32() if t.bit_width == 32 else pa.int64()
            return values.view(width).cast(pa.float64())
        if pa.types.is_boolean(t):
            raise TypeError("keep_values: an Arrow array of bool; a survivor value must be a number or a string")
        return values
    if isinstance(values, (str, bytes)):
        raise TypeError("keep_values must be a sequence or array with one value per text, not a single str")
    return values


def _survivor_policy(keep: Optional[str], keep_values: Any, table: Any) -> Tuple[str, Any]:
    """The binding's ``--keep`` policy and its values from :func:`dedup`'s ``keep`` and ``keep_values``."""
    if keep is None:
        keep = "center"
    if not isinstance(keep, str):
        raise TypeError(f"keep must be a str, not {type(keep).__name__}")
    if keep in ("max", "min"):
        if keep_values is None:
            raise ValueError(f"keep={keep!r} ranks by keep_values: pass one number or str per text")
        return f"column:keep_values:{keep}", _rank_values(keep_values)
    if keep_values is not None:
        raise ValueError(f"keep_values are ranked only by keep='max' or keep='min', not by keep={keep!r}")
    if keep in _POLICIES:
        return keep, None
    if keep.startswith("column:") and keep.rsplit(":", 1)[-1] in ("max", "min") and keep.count(":") >= 2:
        name = keep[len("column:") : keep.rindex(":")]
        if table is None:
            raise ValueError(
                f"keep={keep!r} reads column {name!r} of a Table: pass a pyarrow Table as texts, or pass the values "
                f"as keep_values with keep={keep.rsplit(':', 1)[-1]!r}"
            )
        if name not in table.column_names:
            columns = ", ".join(table.column_names)
            raise ValueError(f"keep={keep!r}: the Table has no column {name!r} (columns: {columns})")
        return keep, _rank_values(table.column(name))
    raise ValueError(
        f"keep={keep!r} is not a survivor policy: use center, first, last, longest, shortest, max or min (with "
        "keep_values), or column:NAME:max or column:NAME:min (with a Table)"
    )


def dedup(
    texts: Any,
    ids: Any = None,
    *,
    text_column: Optional[str] = None,
    id_column: Optional[str] = None,
    threshold: Optional[float] = None,
    bands: Optional[int] = None,
    rows: Optional[int] = None,
    verify: str = _D["verify"],
    groups: Optional[str] = None,
    keep: Optional[str] = None,
    keep_values: Any = None,
    short: str = _D["short"],
    kernel: str = _D["kernel"],
    num_perm: int = _D["num_perm"],
    seed: int = _D["seed"],
    shingle: str = _D["shingle"],
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    bucket_cap: int = _D["bucket_cap"],
    max_candidates: int = _D["max_candidates"],
    pair_budget: int = _D["pair_budget"],
    isa: Optional[str] = None,
    threads: Optional[int] = None,
) -> DedupResult:
    """Near-duplicate detection, as ``lshbench dedup``: returns a :class:`DedupResult` (pairs, clusters, the
    removal audit, the keep mask, and the kept rows of a Table). It unpacks as ``pairs, clusters``.

    The tables hold the rows of ``lshbench dedup --pairs --clusters --removed`` on the same documents (the CSV
    files print floats to 6 decimals).

    texts: the documents (see :func:`sketch`), or a pyarrow ``Table`` (or ``RecordBatch``) holding them in
        ``text_column`` (default ``"text"``); then ``kept`` is that Table filtered to the surviving rows.
    ids: one id per text (a sequence or Arrow array; converted with ``str``), or ``id_column`` of the Table;
        default the 0-based positions.
    threshold: verification threshold in (0, 1]; ``None`` is 0.5. Without ``bands``/``rows`` it also picks the
        banding (P(threshold) >= 0.99, then the smallest P(threshold/2)); with them, a threshold the banding
        finds with probability below 1/2 is refused, as the CLI does.
    verify: ``exact`` (shingle-set Jaccard), ``estimate`` (the signatures) or ``none``.
    groups: ``components`` (connected components) or ``center`` (every member pairs with its centre, and no two
        kept documents form a verified pair). ``None`` chooses as the CLI does, where ``--kept``/``--removed``
        make ``center`` the default: ``center`` when the call asks for survivors (a ``keep`` policy, or a Table
        whose kept rows it returns), else ``components``, so ``pairs, clusters = dedup(texts)`` is unchanged.
        The mask and the audit are always returned; under ``components`` a removed document may share nothing
        with its survivor (a chain), which is why survivor calls default to ``center``.
    keep: which member of a group survives (``--keep``): ``center`` (the most connected member; the default),
        ``first``, ``last`` (input order), ``longest``, ``shortest`` (UTF-8 bytes, ties to the earliest),
        ``max`` or ``min`` of ``keep_values``, or ``column:NAME:max``/``column:NAME:min`` of the Table's column
        NAME. A document with no value (None, null, NaN) never survives one that has one.
    keep_values: one value per text for ``keep="max"``/``"min"``: a sequence of int, float, str or None, a numpy
        array, or a pyarrow array (numbers, decimals, dates and timestamps rank as numbers, strings byte by
        byte). Numbers and strings cannot be mixed.
    short: documents shorter than one shingle (``--short``): ``exact`` (matched by whole text), ``keep`` (kept,
        never matched) or ``drop`` (removed; in the audit with rule ``short:drop``).
    The other arguments are those of :func:`sketch` and the CLI's ``--bucket-cap``, ``--max-candidates`` and
    ``--pair-budget``. Bad arguments raise ``ValueError`` (``TypeError`` for a wrong type).
    """
    import pyarrow as pa

    table = None
    if isinstance(texts, pa.RecordBatch):
        texts = pa.Table.from_batches([texts])
    if isinstance(texts, pa.Table):
        table = texts
        text_column = "text" if text_column is None else text_column
        for what, name in (("text_column", text_column), ("id_column", id_column)):
            if name is not None and name not in table.column_names:
                raise ValueError(
                    f"{what}={name!r}: the Table has no such column (columns: {', '.join(table.column_names)})"
                )
        if id_column is not None:
            if ids is not None:
                raise ValueError("pass ids or id_column, not both")
            ids = table.column(id_column)
        texts = table.column(text_column)
    elif text_column is not None or id_column is not None:
        raise TypeError("text_column and id_column name columns of a pyarrow Table; texts is not one")
    policy, values = _survivor_policy(keep, keep_values, table)
    if groups is None:
        groups = "center" if keep is not None or table is not None else "components"
    if threshold is not None:
        threshold = float(threshold)
    pairs, clusters, removed, mask = _lshbench.dedup_texts(
        _texts(texts),
        ids,
        threshold,
        None if bands is None else _count("bands", bands),
        None if rows is None else _count("rows", rows),
        verify,
        groups,
        kernel,
        _count("num_perm", num_perm),
        _count("seed", seed),
        shingle,
        bool(lowercase),
        bool(collapse_whitespace),
        bool(strip_punctuation),
        _count("bucket_cap", bucket_cap),
        _count("max_candidates", max_candidates),
        _count("pair_budget", pair_budget),
        isa,
        _threads(threads),
        policy,
        values,
        short,
    )
    kept = None if table is None else table.filter(pa.array(mask))
    return DedupResult(pairs=pairs, clusters=clusters, removed=removed, mask=mask, kept=kept)


class LSHIndex:
    """A streaming LSH index over the signatures of texts, with ids.

    Documents are signed with the given kernel and shingles (as :func:`sketch`) and banded with the key
    :func:`band_keys` gives. ``save``/``load`` use the state format of ``lshbench dedup --save/--load``: a state
    saved here loads in the CLI and the other way round (the banding is not part of the state).
    """

    def __init__(
        self,
        bands: int,
        rows: int,
        *,
        num_perm: Optional[int] = None,
        kernel: str = _D["kernel"],
        seed: int = _D["seed"],
        shingle: str = _D["shingle"],
        lowercase: bool = False,
        collapse_whitespace: bool = False,
        strip_punctuation: bool = False,
        isa: Optional[str] = None,
        threads: Optional[int] = None,
        _inner: Any = None,
    ) -> None:
        """An empty index of ``bands`` bands of ``rows`` slots; ``num_perm`` defaults to ``bands * rows``."""
        if _inner is not None:
            self._inner = _inner
            return
        self._inner = _lshbench.LSHIndex(
            _count("bands", bands),
            _count("rows", rows),
            kernel,
            None if num_perm is None else _count("num_perm", num_perm),
            _count("seed", seed),
            shingle,
            bool(lowercase),
            bool(collapse_whitespace),
            bool(strip_punctuation),
            isa,
            _threads(threads),
        )

    def __len__(self) -> int:
        return len(self._inner)

    def __repr__(self) -> str:
        b, r = self.banding
        return f"LSHIndex(bands={b}, rows={r}, documents={len(self)}, params={self.params})"

    @property
    def ids(self) -> list:
        """The ids held, in insertion order."""
        return self._inner.ids

    @property
    def banding(self) -> Tuple[int, int]:
        """(bands, rows)."""
        return self._inner.banding

    @property
    def params(self) -> dict:
        """What made the signatures: kernel, num_perm, seed, shingle and the normalisation flags."""
        return self._inner.params

    def signatures(self) -> np.ndarray:
        """The signatures held, a ``uint32`` array ``(len(self), num_perm)``."""
        return self._inner.signatures()

    def insert(self, texts: Any, ids: Any = None) -> None:
        """Signs ``texts`` and adds them under ``ids`` (default: their positions in the index, as str)."""
        self._inner.insert(_texts(texts), ids)

    def remove(self, ids: Any) -> int:
        """Removes every document held under each of ``ids`` (one id, or an iterable of them) from the index.

        Returns how many documents were removed. Raises ``KeyError``, removing nothing, if an id is not held.
        """
        if isinstance(ids, (str, bytes, int)):
            ids = [ids]
        return self._inner.remove(ids)

    def query(self, texts: Any) -> list:
        """For each text, the ids of the documents held that share a band with it (sorted by position)."""
        return self._inner.query(_texts(texts))

    def query_then_insert(self, texts: Any, ids: Any = None) -> list:
        """Online dedup: for each text in order, the ids already held that share a band with it, then adds it.

        Over a stream every candidate pair is reported once, by its later document.
        """
        return self._inner.query_then_insert(_texts(texts), ids)

    def save(self, path: Any) -> None:
        """Writes the ids and signatures in the state format of ``lshbench dedup --save``."""
        self._inner.save(str(path))

    @classmethod
    def load(
        cls, path: Any, bands: int, rows: int, *, isa: Optional[str] = None, threads: Optional[int] = None
    ) -> "LSHIndex":
        """Reads a state file (``lshbench dedup --save``, or :meth:`save`) and bands it with ``(bands, rows)``.

        The kernel, num_perm, seed, shingle and normalisation come from the file.
        """
        inner = _lshbench.LSHIndex.load(
            str(path), _count("bands", bands), _count("rows", rows), isa, _threads(threads)
        )
        return cls(0, 0, _inner=inner)
