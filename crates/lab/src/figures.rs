//! The figures an experiment writes into its folder: each [`Chart`] drawn by [`super::plot`] (with the `plots`
//! feature) as `<stem>.png` and `<stem>.svg`, and the summary's section that links them.

use super::chart::{Chart, DRAWN, NOT_DRAWN};
use super::runner::Ctx;
use crate::error::ExperimentError;

/// The figures one experiment writes into its folder, as `<stem>.png` and `<stem>.svg`.
#[derive(Debug, Default)]
pub struct Figures {
    stems: Vec<String>,
}

impl Figures {
    /// No figures yet.
    pub fn new() -> Figures {
        Figures::default()
    }

    /// Draws one chart as `stem`; returns the markdown image link, or `None` when the build cannot draw.
    pub fn chart(
        &mut self,
        ctx: &Ctx,
        stem: &str,
        chart: &Chart,
    ) -> Result<Option<String>, ExperimentError> {
        if !DRAWN {
            return Ok(None);
        }
        #[cfg(feature = "plots")]
        super::plot::save(chart, &ctx.file(stem)?)?;
        #[cfg(not(feature = "plots"))]
        let _ = (ctx, chart);
        self.stems.push(stem.to_string());
        Ok(Some(link(stem)))
    }

    /// Draws a grid of small multiples, `cols` per row, under one title, as `stem`; returns the markdown image
    /// link, or `None` when nothing was drawn. Panels without a series are left out, a grid without panels is
    /// not drawn, and neither is anything when the build cannot draw.
    pub fn grid(
        &mut self,
        ctx: &Ctx,
        stem: &str,
        title: &str,
        panels: Vec<Chart>,
        cols: usize,
    ) -> Result<Option<String>, ExperimentError> {
        let panels: Vec<Chart> = panels
            .into_iter()
            .filter(|c| !c.series.is_empty())
            .collect();
        if panels.is_empty() || !DRAWN {
            return Ok(None);
        }
        #[cfg(feature = "plots")]
        super::plot::save_grid(title, &panels, cols, &ctx.file(stem)?)?;
        #[cfg(not(feature = "plots"))]
        let _ = (ctx, title, cols);
        self.stems.push(stem.to_string());
        Ok(Some(link(stem)))
    }

    /// A "Figures" section for the summary: a markdown image link per figure drawn, or the note that the
    /// build draws none.
    pub fn section(&self) -> (String, String) {
        let body = if DRAWN {
            self.stems.iter().map(|s| link(s)).collect()
        } else {
            format!("{NOT_DRAWN}\n")
        };
        ("Figures".to_string(), body)
    }
}

impl Figures {
    /// [`Figures::section`] when the build draws no charts, for summaries that place their links themselves.
    pub fn not_drawn(&self) -> Option<(String, String)> {
        (!DRAWN).then(|| self.section())
    }
}

fn link(stem: &str) -> String {
    format!("![{stem}]({stem}.png)\n")
}
