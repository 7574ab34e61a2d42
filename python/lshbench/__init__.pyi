"""Type stubs of the lshbench package (see the docstrings in __init__.py)."""

from os import PathLike
from typing import Any, Iterator, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__version__: str
# The defaults every front end shares (the Rust table lshbench_core::defaults), by parameter name.
DEFAULTS: dict[str, Union[str, int]]

# A pyarrow StringArray / LargeStringArray / StringViewArray / ChunkedArray (or any object exporting
# __arrow_c_array__ / __arrow_c_stream__), a sequence of str, or a numpy array of str.
Texts = Union[pa.Array, pa.ChunkedArray, Sequence[str], npt.NDArray[Any], Any]

class TuneRow(TypedDict):
    bands: int
    rows: int
    rule_of_thumb: float
    steepest: float
    p_fp: float
    p_recall: float

class TuneResult(TypedDict):
    feasible: bool
    meets_recall: bool
    choice: TuneRow
    table: list[TuneRow]
    report: str

def kernels() -> list[str]: ...
def isas() -> list[str]: ...
def sketch(
    texts: Texts,
    *,
    kernel: str = "oph-opt",
    num_perm: int = 128,
    seed: int = 42,
    shingle: str = "char:5",
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    isa: Optional[str] = None,
    threads: Optional[int] = None,
) -> npt.NDArray[np.uint32]: ...
def band_keys(signatures: npt.ArrayLike, bands: int, rows: int, *, seed: int = 42) -> npt.NDArray[np.uint64]: ...
def estimate(sig_a: npt.ArrayLike, sig_b: npt.ArrayLike, *, kernel: str = "oph-opt", seed: int = 42) -> float: ...
def estimate_pairs(
    signatures: npt.ArrayLike,
    pairs: npt.ArrayLike,
    *,
    kernel: str = "oph-opt",
    seed: int = 42,
    threads: Optional[int] = None,
) -> npt.NDArray[np.float64]: ...
def jaccard(
    text_a: str,
    text_b: str,
    *,
    shingle: str = "char:5",
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    seed: int = 42,
) -> float: ...
def jaccard_pairs(
    texts: Texts,
    pairs: npt.ArrayLike,
    *,
    shingle: str = "char:5",
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    seed: int = 42,
    threads: Optional[int] = None,
) -> npt.NDArray[np.float64]: ...
def scurve(bands: int, rows: int, s: Union[float, npt.ArrayLike]) -> Any: ...
def tune(
    num_perm: int,
    fn: Tuple[float, float] = (0.5, 0.01),
    fp: Tuple[float, float] = (0.05, 0.001),
) -> TuneResult: ...
class DedupResult:
    pairs: pa.Table
    clusters: pa.Table
    removed: pa.Table
    mask: npt.NDArray[np.bool_]
    kept: Optional[pa.Table]
    def __iter__(self) -> Iterator[pa.Table]: ...

def dedup(
    texts: Union[Texts, pa.Table, pa.RecordBatch],
    ids: Optional[Union[Sequence[Any], pa.Array, pa.ChunkedArray]] = None,
    *,
    text_column: Optional[str] = None,
    id_column: Optional[str] = None,
    threshold: Optional[float] = None,
    bands: Optional[int] = None,
    rows: Optional[int] = None,
    verify: str = "exact",
    groups: Optional[str] = None,
    keep: Optional[str] = None,
    keep_values: Optional[Union[Sequence[Any], npt.NDArray[Any], pa.Array, pa.ChunkedArray]] = None,
    short: str = "exact",
    kernel: str = "oph-opt",
    num_perm: int = 128,
    seed: int = 42,
    shingle: str = "char:5",
    lowercase: bool = False,
    collapse_whitespace: bool = False,
    strip_punctuation: bool = False,
    bucket_cap: int = 5000,
    max_candidates: int = 20_000_000,
    pair_budget: int = 2000,
    isa: Optional[str] = None,
    threads: Optional[int] = None,
) -> DedupResult: ...

class LSHIndex:
    def __init__(
        self,
        bands: int,
        rows: int,
        *,
        num_perm: Optional[int] = None,
        kernel: str = "oph-opt",
        seed: int = 42,
        shingle: str = "char:5",
        lowercase: bool = False,
        collapse_whitespace: bool = False,
        strip_punctuation: bool = False,
        isa: Optional[str] = None,
        threads: Optional[int] = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    @property
    def ids(self) -> list[str]: ...
    @property
    def banding(self) -> Tuple[int, int]: ...
    @property
    def params(self) -> dict[str, Any]: ...
    def signatures(self) -> npt.NDArray[np.uint32]: ...
    def insert(self, texts: Texts, ids: Optional[Sequence[Any]] = None) -> None: ...
    def remove(self, ids: Union[Any, Sequence[Any]]) -> int: ...
    def query(self, texts: Texts) -> list[list[str]]: ...
    def query_then_insert(self, texts: Texts, ids: Optional[Sequence[Any]] = None) -> list[list[str]]: ...
    def save(self, path: Union[str, PathLike[str]]) -> None: ...
    @classmethod
    def load(
        cls,
        path: Union[str, PathLike[str]],
        bands: int,
        rows: int,
        *,
        isa: Optional[str] = None,
        threads: Optional[int] = None,
    ) -> "LSHIndex": ...

# The client of `lshbench serve` (lshbench/client.py).
class ServerError(Exception):
    status: int
    message: str
    def __init__(self, status: int, message: str) -> None: ...

class Client:
    url: str
    token: Optional[str]
    timeout: float
    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Client: ...
    def __exit__(self, *exc: Any) -> None: ...
    def check(self, documents: Sequence[Any], insert: str = "always") -> list[dict[str, Any]]: ...
    def query(self, documents: Sequence[Any]) -> list[dict[str, Any]]: ...
    def insert(self, documents: Sequence[Any]) -> list[dict[str, Any]]: ...
    def get(self, doc_id: str) -> Optional[dict[str, Any]]: ...
    def delete(self, doc_id: str) -> bool: ...
    def stats(self) -> dict[str, Any]: ...
    def health(self) -> bool: ...
