#pragma once
// The per-rank action orders of each schedule (internal to schedule.cc): kind, micro-batch and
// chunk only; build_schedule() adds the sends and receives they imply. The orders are documented
// with ScheduleKind in schedule.h.
#include <vector>

#include "brigade/parallel/pipeline/schedule.h"

namespace brigade::detail {

std::vector<Action> gpipe_order(const PipelineShape& shape, int rank);
std::vector<Action> one_f_one_b_order(const PipelineShape& shape, int rank);
std::vector<Action> interleaved_order(const PipelineShape& shape, int rank);
std::vector<Action> zb_h1_order(const PipelineShape& shape, int rank);

}  // namespace brigade::detail
