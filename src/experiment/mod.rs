//! The research harness: experiment configs, runners, CSV and plots. OWNER: experiment helper. To be written.
