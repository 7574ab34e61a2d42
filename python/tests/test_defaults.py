"""Every default of the Python package is the shared table's (``lshbench.DEFAULTS``, the Rust table
``lshbench_core::defaults`` that the command line and the service read too): a signature that drifts from it
fails here."""

import inspect

import lshbench
import lshbench.spark as lspark


def _signatures():
    for name in lshbench.__all__:
        f = getattr(lshbench, name)
        if inspect.isfunction(f):
            yield name, inspect.signature(f)
    yield "LSHIndex", inspect.signature(lshbench.LSHIndex.__init__)
    yield "spark.dedup", inspect.signature(lspark.dedup)


def test_the_table_holds_the_documented_defaults():
    d = lshbench.DEFAULTS
    assert d["kernel"] == "oph-opt" and d["num_perm"] == 128 and d["seed"] == 42 and d["shingle"] == "char:5"
    assert d["verify"] == "exact" and d["keep"] == "center" and d["short"] == "exact"
    assert d["kernel"] in lshbench.kernels()


def test_every_python_default_is_the_shared_table():
    checked = 0
    wrong = []
    for where, sig in _signatures():
        for p in sig.parameters.values():
            # None means "not given": the function says what it falls back to (a banding rule, every CPU).
            if p.name in lshbench.DEFAULTS and p.default is not inspect.Parameter.empty and p.default is not None:
                checked += 1
                if p.default != lshbench.DEFAULTS[p.name]:
                    wrong.append(f"{where}({p.name}={p.default!r}), the table has {lshbench.DEFAULTS[p.name]!r}")
    assert not wrong, "\n".join(wrong)
    assert checked >= 25, f"only {checked} defaults found: the scan is not reading the signatures"


def test_the_spark_command_line_defaults_are_the_shared_table():
    dedup = next(
        a for a in lspark._parser()._subparsers._group_actions[0].choices.values() if a.prog.endswith("dedup")
    )
    got = {a.dest: a.default for a in dedup._actions if a.dest in lshbench.DEFAULTS}
    assert set(got) >= {"kernel", "num_perm", "seed", "shingle", "verify", "keep", "short", "bucket_cap"}
    assert got == {k: lshbench.DEFAULTS[k] for k in got}
