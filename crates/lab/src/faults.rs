//! Fault injection: the self-checks run against deliberately broken kernels, and must catch every one.
//!
//! A check that cannot fail proves nothing. This experiment (`kind = "faults"`) runs the accuracy and S-curve
//! measurements and their self-checks ([`super::accuracy::check_in`], [`super::scurve::check_in`]) on the
//! correct kernels its sweeps name and on every fault of [`FAULTS`], one subject at a time, and records which
//! check fails for which subject. Its own checks: every fault is caught by at least one check, and every correct
//! kernel passes every check. So `lshbench run experiments/faults.toml --quick` exits 0 only when both hold.
//!
//! The faults themselves are in [`super::broken`].

use super::accuracy::{self, AccuracyRow};
use super::broken::{FAULTS, fault, unknown_fault};
use super::config::FaultsConfig;
use super::report::{Table, write_summary};
use super::runner::{Checks, Ctx, write_csv};
use super::scurve::{self, ScurveRow};
use crate::error::ExperimentError;
use lshbench_core::kernel::KernelSpec;
use serde::{Deserialize, Serialize};

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// One (subject, check) verdict.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FaultRow {
    /// The kernel or fault name.
    pub subject: String,
    /// Whether the subject is a deliberate fault.
    pub fault: bool,
    /// The experiment whose check it is (`accuracy` or `scurve`).
    pub experiment: String,
    /// The check, without its per-cell detail.
    pub check: String,
    /// Whether it passed.
    pub passed: bool,
    /// The numbers behind the verdict.
    pub detail: String,
}

/// The check's kind: its name up to the first ": " (per-cell checks name the cell after it).
fn kind_of(name: &str) -> &str {
    name.split(": ").next().unwrap_or(name)
}

/// The verdicts of one subject's checks, one per (experiment, check kind): failed if any instance failed.
fn verdicts(subject: &str, fault: bool, checks: &[&Checks]) -> Vec<FaultRow> {
    let mut out: Vec<FaultRow> = Vec::new();
    for c in checks.iter().flat_map(|c| c.list.iter()) {
        let kind = kind_of(&c.name);
        match out
            .iter_mut()
            .find(|r| r.experiment == c.experiment && r.check == kind)
        {
            Some(r) => {
                if r.passed && !c.passed {
                    r.passed = false;
                    r.detail = c.detail.clone();
                }
            }
            None => out.push(FaultRow {
                subject: subject.to_string(),
                fault,
                experiment: c.experiment.clone(),
                check: kind.to_string(),
                passed: c.passed,
                detail: c.detail.clone(),
            }),
        }
    }
    out
}

/// A subject to run: its registry entry, whether it is a fault, and the band-width offset.
struct Subject {
    spec: &'static KernelSpec,
    fault: bool,
    offset: usize,
}

/// Runs every subject through the configured sweeps and checks, and returns this experiment's own checks.
pub fn run(ctx: &Ctx, cfg: &FaultsConfig) -> Result<Checks> {
    let subjects = subjects(ctx, cfg)?;
    let mut registry = accuracy::registry();
    registry.extend(FAULTS.iter().map(|f| &f.spec));
    let (acc_rows, sc_rows) = cells(ctx, cfg, &subjects)?;
    let table = verdict_rows(cfg, &subjects, &registry, &acc_rows, &sc_rows)?;
    write_csv(&ctx.file("faults.csv")?, &table)?;

    let mut checks = Checks::new("faults");
    let catches = catches_table(&subjects, &table, &mut checks);
    let sections = vec![
        (
            "Which check catches which fault".to_string(),
            format!(
                "Rows: the correct kernels (which must pass every check) and the deliberate faults (each must \
                 fail at least one). A cell is FAIL when any instance of that check failed for the subject; \
                 `-`: the check does not apply (e.g. the same-output check for a kernel that claims no \
                 reference).\n\n{catches}"
            ),
        ),
        ("The faults".to_string(), fault_list(&subjects)),
        (
            "How".to_string(),
            format!(
                "Every subject runs the same accuracy cells ({} rows in all) and S-curve cells ({} rows) as \
                 the correct kernels, on the same pairs and kernel seeds; then the accuracy and S-curve \
                 self-checks run on each subject's rows alone. `faults.csv` holds every (subject, check) \
                 verdict with its numbers; `accuracy.csv` and `scurve.csv` the measurements.\n",
                acc_rows.len(),
                sc_rows.len()
            ),
        ),
    ];
    write_summary(
        ctx,
        "Fault injection: can the self-checks fail?",
        &sections,
        &checks,
    )?;
    Ok(checks)
}

/// The subjects: every correct kernel a sweep names, then every configured fault, each once.
fn subjects(ctx: &Ctx, cfg: &FaultsConfig) -> Result<Vec<Subject>> {
    let mut subjects: Vec<Subject> = Vec::new();
    let mut add = |spec: &'static KernelSpec, fault: bool, offset: usize| {
        if !subjects.iter().any(|s| s.spec.name == spec.name) {
            subjects.push(Subject {
                spec,
                fault,
                offset,
            });
        }
    };
    for name in cfg
        .accuracy
        .iter()
        .flat_map(|s| s.kernels.iter())
        .chain(cfg.scurve.iter().flat_map(|s| s.kernels.iter()))
    {
        add(lshbench_core::kernel::spec(name)?, false, 0);
    }
    for name in &cfg.faults {
        // The config's validation already refused unknown names.
        let f =
            fault(name).ok_or_else(|| ExperimentError::config(&ctx.source, unknown_fault(name)))?;
        add(&f.spec, true, f.band_width_offset);
    }
    Ok(subjects)
}

/// The cells: correct kernels run the sweeps that name them, faults run every sweep; written to
/// `accuracy.csv` and `scurve.csv`.
fn cells(
    ctx: &Ctx,
    cfg: &FaultsConfig,
    subjects: &[Subject],
) -> Result<(Vec<AccuracyRow>, Vec<ScurveRow>)> {
    let mut acc_cells = Vec::new();
    let mut sc_cells = Vec::new();
    for s in subjects {
        for sweep in &cfg.accuracy {
            if s.fault || sweep.kernels.iter().any(|k| k == s.spec.name) {
                acc_cells.extend(accuracy::sweep_cells(sweep, s.spec));
            }
        }
        for sweep in &cfg.scurve {
            if s.fault || sweep.kernels.iter().any(|k| k == s.spec.name) {
                sc_cells.extend(scurve::sweep_cells(sweep, s.spec, s.offset));
            }
        }
    }
    let acc_rows = accuracy::run_cells(ctx, &acc_cells)?;
    let sc_rows = scurve::run_cells(ctx, &sc_cells)?;
    write_csv(&ctx.file("accuracy.csv")?, &acc_rows)?;
    write_csv(&ctx.file("scurve.csv")?, &sc_rows)?;

    Ok((acc_rows, sc_rows))
}

/// Every (subject, check) verdict: the accuracy and S-curve self-checks run on each subject's rows alone.
fn verdict_rows(
    cfg: &FaultsConfig,
    subjects: &[Subject],
    registry: &[&KernelSpec],
    acc_rows: &[AccuracyRow],
    sc_rows: &[ScurveRow],
) -> Result<Vec<FaultRow>> {
    let mut table: Vec<FaultRow> = Vec::new();
    for s in subjects {
        let name = s.spec.name;
        // A subject's rows, plus those of the kernel it claims to reproduce (for the same-output check).
        let mine = |kernel: &str| kernel == name || s.spec.same_output_as == Some(kernel);
        let acc: Vec<AccuracyRow> = acc_rows
            .iter()
            .filter(|r| mine(&r.kernel))
            .cloned()
            .collect();
        let sc: Vec<ScurveRow> = sc_rows
            .iter()
            .filter(|r| r.kernel == name)
            .cloned()
            .collect();
        let mut a = Checks::new("accuracy");
        if !acc.is_empty() {
            accuracy::check_in(registry, &acc, &mut a)?;
        }
        let mut c = Checks::new("scurve");
        if !sc.is_empty() {
            scurve::check_in(registry, cfg.family_alpha, &sc, &[], &mut c)?;
        }
        table.extend(verdicts(name, s.fault, &[&a, &c]));
    }
    Ok(table)
}

/// Which check catches which fault: each fault must fail at least one check and each correct kernel pass
/// every one (this experiment's own checks), as a table with a column per check and its legend.
fn catches_table(subjects: &[Subject], table: &[FaultRow], checks: &mut Checks) -> String {
    let mut columns: Vec<(String, String)> = Vec::new();
    for r in table {
        let col = (r.experiment.clone(), r.check.clone());
        if !columns.contains(&col) {
            columns.push(col);
        }
    }
    let mut header = vec!["subject".to_string()];
    header.extend(
        columns
            .iter()
            .enumerate()
            .map(|(i, _)| format!("C{}", i + 1)),
    );
    header.push("verdict".into());
    let mut t = Table::new(&header);
    for s in subjects {
        let name = s.spec.name;
        let mine: Vec<&FaultRow> = table.iter().filter(|r| r.subject == name).collect();
        let failed: Vec<&FaultRow> = mine.iter().copied().filter(|r| !r.passed).collect();
        let verdict = if s.fault {
            checks.expect(
                format!("fault `{name}` is caught by at least one check"),
                !failed.is_empty(),
                if failed.is_empty() {
                    format!("every one of {} checks passed", mine.len())
                } else {
                    format!(
                        "caught by: {}",
                        failed
                            .iter()
                            .map(|r| format!("{} / {}", r.experiment, r.check))
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                },
            );
            if failed.is_empty() {
                "MISSED"
            } else {
                "caught"
            }
        } else {
            checks.expect(
                format!("correct kernel `{name}` passes every check"),
                failed.is_empty() && !mine.is_empty(),
                if failed.is_empty() {
                    format!("{} checks passed", mine.len())
                } else {
                    failed
                        .iter()
                        .map(|r| format!("{} / {}: {}", r.experiment, r.check, r.detail))
                        .collect::<Vec<_>>()
                        .join("; ")
                },
            );
            if failed.is_empty() { "passes" } else { "FAILS" }
        };
        let mut row = vec![format!("`{name}`")];
        for (e, c) in &columns {
            row.push(
                match mine.iter().find(|r| r.experiment == *e && r.check == *c) {
                    Some(r) if r.passed => "pass".into(),
                    Some(_) => "**FAIL**".into(),
                    None => "-".into(),
                },
            );
        }
        row.push(verdict.into());
        t.row(row);
    }
    let legend: String = columns
        .iter()
        .enumerate()
        .map(|(i, (e, c))| format!("- C{}: {e}: {c}\n", i + 1))
        .collect();
    format!("{}\n{legend}", t.to_markdown())
}

/// The faults among the subjects, one line each.
fn fault_list(subjects: &[Subject]) -> String {
    subjects
        .iter()
        .filter(|s| s.fault)
        .filter_map(|s| fault(s.spec.name))
        .map(|f| format!("- `{}`: {}\n", f.spec.name, f.about))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lshbench_core::kernel::KernelParams;

    #[test]
    fn faults_are_outside_the_registry_and_build() {
        for f in FAULTS {
            assert!(
                lshbench_core::kernel::spec(f.spec.name).is_err(),
                "{}",
                f.spec.name
            );
            let k = lshbench_core::kernel::build_spec(
                &f.spec,
                &KernelParams {
                    num_perm: 32,
                    seed: 1,
                    isa: None,
                },
            )
            .unwrap();
            assert_eq!(k.num_perm(), 32);
        }
    }

    #[test]
    fn verdicts_group_checks_by_kind() {
        let mut c = Checks::new("scurve");
        c.expect("band agreement: a", true, "");
        c.expect("band agreement: b", false, "off");
        c.expect("other", true, "");
        let v = verdicts("x", true, &[&c]);
        assert_eq!(v.len(), 2);
        assert!(!v[0].passed && v[0].detail == "off" && v[1].passed);
    }
}
