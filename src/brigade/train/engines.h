#pragma once
// The step engine a job's plan asks for (train_engine.h): the model-parallel engine
// (model_parallel_engine.h) when the GPT is cut over pp, tp or ep, else the data-parallel one
// over whole models (dp_engine.h). The trainer and `brigade eval` build theirs here.
#include <memory>

#include "brigade/train/job_plan.h"
#include "brigade/train/train_engine.h"
#include "brigade/train/training_loop.h"

namespace brigade {

// Collective where the engine builds communicators (the mesh); plan: plan_job over this job.
std::unique_ptr<TrainEngine> make_train_engine(TrainContext& ctx, const JobPlan& plan);

}  // namespace brigade
