/**
 * Tensor parallelism: a model split over ranks that run in lockstep — the leader in the
 * model's engine (TpRunner), workers in `neuron --worker` child processes (runWorker) —
 * over a CPU or NCCL communicator.
 */
export { TpRunner, type TpRunnerOptions } from "./tp_runner.ts";
export { runWorker } from "./worker_main.ts";
export { TpError, type TpErrorCode, type WorkerErrorKind } from "./errors.ts";
