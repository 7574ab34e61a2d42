//! Request counts and latency histograms, rendered with the index's gauges in Prometheus's text format.

use lshbench_online::Stats;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Upper bounds of the latency histogram's buckets, in seconds.
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

#[derive(Default)]
struct Histogram {
    /// Non-cumulative counts per bucket, the last one past every bound.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

/// What the service counted since it started.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, &'static str, u16), u64>>,
    latency: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl Metrics {
    /// Counts one answered request and its latency.
    pub fn record(&self, route: &'static str, method: &'static str, status: u16, seconds: f64) {
        *self
            .requests
            .lock()
            .unwrap()
            .entry((route, method, status))
            .or_default() += 1;
        let mut latency = self.latency.lock().unwrap();
        let h = latency.entry(route).or_default();
        let i = BUCKETS
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(BUCKETS.len());
        h.counts[i] += 1;
        h.sum += seconds;
        h.count += 1;
    }

    /// The Prometheus text exposition of the counters and of `stats`'s gauges.
    pub fn render(&self, stats: &Stats) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# HELP lshbench_requests_total HTTP requests answered, by route, method and status."
        );
        let _ = writeln!(s, "# TYPE lshbench_requests_total counter");
        for ((route, method, status), n) in self.requests.lock().unwrap().iter() {
            let _ = writeln!(
                s,
                "lshbench_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(
            s,
            "# HELP lshbench_request_duration_seconds Time from the request's arrival to its answer."
        );
        let _ = writeln!(s, "# TYPE lshbench_request_duration_seconds histogram");
        for (route, h) in self.latency.lock().unwrap().iter() {
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                cumulative += h.counts[i];
                let _ = writeln!(
                    s,
                    "lshbench_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                s,
                "lshbench_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                s,
                "lshbench_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                s,
                "lshbench_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.count
            );
        }
        let counts = &stats.counts;
        let gauges: [(&str, &str, &str, f64); 14] = [
            (
                "documents",
                "gauge",
                "Documents in the index (durable, not deleted).",
                stats.documents as f64,
            ),
            (
                "durable_seq",
                "gauge",
                "The last durable sequence number.",
                stats.durable_seq as f64,
            ),
            (
                "disk_bytes",
                "gauge",
                "Bytes of the index directory's files.",
                stats.disk_bytes as f64,
            ),
            (
                "log_bytes",
                "gauge",
                "Bytes of write-ahead log segments.",
                stats.log_bytes as f64,
            ),
            (
                "memory_bytes",
                "gauge",
                "Bytes of memory the index holds.",
                stats.memory_bytes as f64,
            ),
            (
                "memory_bytes_per_document",
                "gauge",
                "Bytes of memory the index holds per document.",
                stats.memory_bytes_per_document,
            ),
            (
                "resident_bytes",
                "gauge",
                "The process's resident memory.",
                stats.resident_bytes.unwrap_or(0) as f64,
            ),
            (
                "group_commits_total",
                "counter",
                "Log syncs (group commits).",
                stats.group_commits as f64,
            ),
            (
                "group_writes_total",
                "counter",
                "Writes carried by those group commits.",
                stats.group_writes as f64,
            ),
            (
                "checked_total",
                "counter",
                "Documents checked.",
                counts["checked"].as_f64().unwrap_or(0.0),
            ),
            (
                "inserted_total",
                "counter",
                "Documents inserted.",
                counts["inserted"].as_f64().unwrap_or(0.0),
            ),
            (
                "queried_total",
                "counter",
                "Documents queried.",
                counts["queried"].as_f64().unwrap_or(0.0),
            ),
            (
                "duplicates_reported_total",
                "counter",
                "Near-duplicates reported by checks.",
                counts["duplicates_reported"].as_f64().unwrap_or(0.0),
            ),
            (
                "writes_refused_total",
                "counter",
                "Writes refused (full disk, memory limit).",
                counts["writes_refused"].as_f64().unwrap_or(0.0),
            ),
        ];
        for (name, kind, help, value) in gauges {
            let _ = writeln!(s, "# HELP lshbench_{name} {help}");
            let _ = writeln!(s, "# TYPE lshbench_{name} {kind}");
            let _ = writeln!(s, "lshbench_{name} {value}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_counts_add_up() {
        let m = Metrics::default();
        for (i, secs) in [0.00005, 0.003, 0.003, 7.0, 30.0].iter().enumerate() {
            m.record("/v1/check", "POST", if i == 4 { 507 } else { 200 }, *secs);
        }
        let latency = m.latency.lock().unwrap();
        let h = &latency["/v1/check"];
        assert_eq!(h.counts.iter().sum::<u64>(), 5);
        assert_eq!(h.counts[0], 1);
        assert_eq!(h.counts[BUCKETS.len()], 1, "30 s is past every bound");
        drop(latency);
        let requests = m.requests.lock().unwrap();
        assert_eq!(requests[&("/v1/check", "POST", 200)], 4);
        assert_eq!(requests[&("/v1/check", "POST", 507)], 1);
    }
}
