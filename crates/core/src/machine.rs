//! What machine a result came from: CPU model, vendor, family and model numbers, CPU features, git commit.
//! Every result records these.

use std::process::Command;

/// The CPU model name as the OS reports it (`/proc/cpuinfo` on Linux), or "unknown".
pub fn cpu_model() -> String {
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        for line in info.lines() {
            if let Some(rest) = line.strip_prefix("model name")
                && let Some((_, name)) = rest.split_once(':')
            {
                return name.trim().to_string();
            }
        }
    }
    "unknown".to_string()
}

/// The CPU's vendor, family, model and stepping as the OS reports them (`/proc/cpuinfo` on Linux), such as
/// "AuthenticAMD family 25 model 17 stepping 1", or "" where it does not. Two CPUs that print the same model
/// name (a VM's "AMD EPYC" is Zen 3 or Zen 4) differ here.
pub fn cpu_id() -> String {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return String::new();
    };
    cpu_id_from(&info)
}

fn cpu_id_from(info: &str) -> String {
    let field = |key: &str| {
        info.lines()
            .take_while(|l| !l.trim().is_empty())
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
    };
    let mut out = Vec::new();
    if let Some(v) = field("vendor_id") {
        out.push(v);
    }
    for (key, label) in [
        ("cpu family", "family"),
        ("model", "model"),
        ("stepping", "stepping"),
    ] {
        if let Some(v) = field(key) {
            out.push(format!("{label} {v}"));
        }
    }
    out.join(" ")
}

/// The CPU model name with its vendor, family and model numbers in parentheses where the OS reports them:
/// what every result records as its CPU.
pub fn cpu_name() -> String {
    let id = cpu_id();
    if id.is_empty() {
        cpu_model()
    } else {
        format!("{} ({id})", cpu_model())
    }
}

/// The SIMD-relevant CPU features detected at run time, in a fixed order.
pub fn cpu_features() -> Vec<&'static str> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! probe {
            ($($f:tt),*) => { $( if std::arch::is_x86_feature_detected!($f) { out.push($f); } )* };
        }
        probe!(
            "sse4.2",
            "popcnt",
            "bmi2",
            "avx",
            "avx2",
            "fma",
            "avx512f",
            "avx512bw",
            "avx512dq",
            "avx512vl",
            "avx512ifma",
            "avx512vbmi",
            "avx512vbmi2",
            "avx512vpopcntdq"
        );
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            out.push("neon");
        }
    }
    out
}

/// Logical CPUs available to this process.
pub fn logical_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The git commit of the working tree (with `-dirty` when it has uncommitted changes), or "unknown".
pub fn git_commit() -> String {
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output();
    let Ok(head) = head else {
        return "unknown".into();
    };
    if !head.status.success() {
        return "unknown".into();
    }
    let mut commit = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    if dirty {
        commit.push_str("-dirty");
    }
    commit
}

/// One line describing the machine, for result headers and `lshbench info`.
pub fn describe() -> String {
    format!(
        "{} | {} logical CPUs | {} {} | features: {}",
        cpu_name(),
        logical_cpus(),
        std::env::consts::OS,
        std::env::consts::ARCH,
        cpu_features().join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_id_names_vendor_family_model_and_stepping_of_the_first_cpu() {
        let info = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\nvendor_id\t: Other\n";
        assert_eq!(
            cpu_id_from(info),
            "AuthenticAMD family 25 model 17 stepping 1"
        );
        // "model name" is not "model".
        assert_eq!(cpu_id_from("model name\t: X\n"), "");
        assert_eq!(cpu_id_from(""), "");
    }
}
