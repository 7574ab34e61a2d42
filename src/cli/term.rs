//! The one progress bar: a spinner on stderr when stderr is a terminal, hidden otherwise. It implements the
//! library's [`lshbench_core::exec::Progress`] hook.

use std::io::IsTerminal;

/// A terminal progress bar counting documents.
pub struct Bar(indicatif::ProgressBar);

impl Bar {
    /// A spinner with `what` as its message (hidden unless stderr is a terminal).
    pub fn new(what: &str) -> Bar {
        if !std::io::stderr().is_terminal() {
            return Bar(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {msg} {human_pos} documents ({per_sec}) {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.set_message(what.to_string());
        Bar(bar)
    }

    /// Clears the bar from the terminal.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl lshbench_core::exec::Progress for Bar {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn stage(&self, what: &str) {
        self.0.set_message(what.to_string());
    }
}
