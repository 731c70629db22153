// Schedule validation, the sends and receives each action implies, and the bubble each
// schedule's analysis predicts. The orders themselves are in schedule_builders.cc.
#include "brigade/parallel/pipeline/schedule.h"

#include <sstream>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/parallel/pipeline/schedule_builders.h"

namespace brigade {

const char* schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::k1F1B:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kZbH1:
      return "zb-h1";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved,
                         ScheduleKind::kZbH1}) {
    if (name == schedule_kind_name(k)) return k;
  }
  throw ConfigError("pipeline schedule \"" + name +
                    "\": unknown; allowed: gpipe, 1f1b, interleaved, zb-h1");
}

const char* action_kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "F";
    case ActionKind::kBackward:
      return "BW";
    case ActionKind::kBackwardInput:
      return "B";
    case ActionKind::kBackwardWeight:
      return "W";
  }
  return "?";
}

void validate_schedule(ScheduleKind kind, const PipelineShape& shape, int64_t n_layers) {
  const std::string name = schedule_kind_name(kind);
  auto positive = [&](const char* what, int value) {
    if (value < 1)
      throw ConfigError("pipeline " + name + ": " + what + " = " + std::to_string(value) +
                        ": must be >= 1");
  };
  positive("pp (ranks)", shape.ranks);
  positive("micro_batches", shape.micro_batches);
  positive("virtual_stages", shape.virtual_stages);
  if (kind != ScheduleKind::kInterleaved && shape.virtual_stages != 1)
    throw ConfigError("pipeline " + name + " runs one stage per rank: virtual_stages = " +
                      std::to_string(shape.virtual_stages) +
                      " must be 1 (only interleaved has virtual stages)");
  if (kind == ScheduleKind::kInterleaved && shape.micro_batches % shape.ranks != 0)
    throw ConfigError(
        "pipeline interleaved: micro_batches = " + std::to_string(shape.micro_batches) +
        " must be a multiple of pp = " + std::to_string(shape.ranks) +
        " (micro-batches go through the chunks in groups of pp)");
  if (n_layers > 0 && shape.stages() > n_layers)
    throw ConfigError("pipeline " + name + ": " + std::to_string(shape.stages()) +
                      " stages (pp = " + std::to_string(shape.ranks) + " x virtual_stages = " +
                      std::to_string(shape.virtual_stages) + ") but the model has only " +
                      std::to_string(n_layers) + " layers; every stage needs at least one");
}

uint32_t activation_tag(int stage, int mb, int micro_batches) {
  return static_cast<uint32_t>((stage * micro_batches + mb) * 2);
}

uint32_t gradient_tag(int stage, int mb, int micro_batches) {
  return static_cast<uint32_t>((stage * micro_batches + mb) * 2 + 1);
}

namespace {

// Fills in the transfers: a forward receives from the previous stage and sends to the next; an
// input-gradient pass (fused or not) receives from the next stage and sends to the previous.
void add_transfers(Schedule& s) {
  const int p = s.shape.ranks, m = s.shape.micro_batches, last = s.shape.stages() - 1;
  for (int r = 0; r < p; ++r) {
    for (Action& a : s.ranks[r]) {
      const int stage = s.global_stage(r, a.chunk);
      const int prev = (r + p - 1) % p, next = (r + 1) % p;
      if (a.kind == ActionKind::kForward) {
        if (stage > 0) {
          a.recv_from = prev;
          a.recv_tag = activation_tag(stage, a.mb, m);
        }
        if (stage < last) {
          a.send_to = next;
          a.send_tag = activation_tag(stage + 1, a.mb, m);
        }
      } else if (a.kind != ActionKind::kBackwardWeight) {
        if (stage < last) {
          a.recv_from = next;
          a.recv_tag = gradient_tag(stage, a.mb, m);
        }
        if (stage > 0) {
          a.send_to = prev;
          a.send_tag = gradient_tag(stage - 1, a.mb, m);
        }
      }
    }
  }
}

}  // namespace

Schedule build_schedule(ScheduleKind kind, const PipelineShape& shape) {
  validate_schedule(kind, shape);
  Schedule s;
  s.kind = kind;
  s.shape = shape;
  s.ranks.resize(shape.ranks);
  for (int r = 0; r < shape.ranks; ++r) {
    switch (kind) {
      case ScheduleKind::kGPipe:
        s.ranks[r] = detail::gpipe_order(shape, r);
        break;
      case ScheduleKind::k1F1B:
        s.ranks[r] = detail::one_f_one_b_order(shape, r);
        break;
      case ScheduleKind::kInterleaved:
        s.ranks[r] = detail::interleaved_order(shape, r);
        break;
      case ScheduleKind::kZbH1:
        s.ranks[r] = detail::zb_h1_order(shape, r);
        break;
    }
  }
  add_transfers(s);
  return s;
}

double theoretical_bubble(ScheduleKind kind, const PipelineShape& shape, const ActionCosts& costs) {
  const double p = shape.ranks, m = shape.micro_batches, v = shape.virtual_stages;
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::k1F1B:
      return (p - 1) / (m + p - 1);
    case ScheduleKind::kInterleaved:
      return (p - 1) / (v * m + p - 1);
    case ScheduleKind::kZbH1: {
      const double f = costs.forward, b = costs.backward_input, w = costs.backward_weight;
      const double bubble = (p - 1) * (f + b - w);
      return bubble / (m * (f + b + w) + bubble);
    }
  }
  return 0.0;
}

std::string describe_schedule(const Schedule& schedule) {
  std::ostringstream out;
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    out << "rank " << r << ":";
    for (const Action& a : schedule.ranks[r]) {
      out << ' ' << action_kind_name(a.kind) << a.mb;
      if (schedule.shape.virtual_stages > 1) out << '.' << a.chunk;
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace brigade
