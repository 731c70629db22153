#pragma once
// The run report of `brigade report`: one self-contained HTML file (inline SVG and CSS, no
// network, no library) with, for one run or several overlaid (each curve labelled with its run):
// train and validation loss against step and against wall time, tokens/s, MFU, communication
// bytes per step, learning rate, a resume marker at each segment, and per run the stacked
// step-time breakdown and the per-rank busy time (flagged stragglers marked); then the summary,
// config and provenance as tables. A short script on the page, which needs no network, writes
// what the browser rendered (every chart's size and drawn points) into #render-check, so a
// headless browser test can read it back.
#include <string>
#include <vector>

#include "brigade/monitor/report/run_records.h"

namespace brigade {

std::string build_report_html(const std::vector<RunRecords>& runs);

}  // namespace brigade
