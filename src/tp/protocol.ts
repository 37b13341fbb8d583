/**
 * The leader <-> worker protocol (WIRE.md, "Tensor-parallel workers"): one JSON object per
 * line each way, tagged by `op`, exactly one reply per request.
 *
 * `init`'s comm id is an ncclUniqueId, or for the CPU communicator our own 128 bytes
 * (cpu_comm.ts: a magic prefix, the world size, the shared memory segment's random name);
 * a worker tells which by the bytes.
 *
 * Additive fields, spoken only between our own processes:
 * - `load_shard`: `model_id`, `model_path`, `file_size` (the worker opens the same GGUF and
 *   checks its size), `device` (the leader's resolved backend kind, never `auto`, so every
 *   rank computes on the same kind), `threads`, `mmap` (weights in place or copied), `repack` (Q8_0/Q4_K repacked at load), `kv` (the KV block pool: `block_size`,
 *   `n_blocks`, `dtype`). Rank and world size come from the worker's command line.
 * - `generate_step`: `positions` (one per token; default `offset`, `offset`+1, ...) and
 *   `sequences` (`row_start`, `row_count`, `block_table`: the step's rows per sequence and
 *   the cache blocks of its positions; default one sequence over blocks 0, 1, ...), so a
 *   continuous-batching step reaches every rank unchanged.
 * - `generate_step_ok`: `step`, how many steps this worker has run since its shard loaded;
 *   the leader checks it against its own count, so ranks never drift out of lockstep.
 */

import { z } from "zod";
import { TpError, WORKER_ERROR_KINDS, type WorkerErrorKind } from "./errors.ts";

const modelId = z.string().min(1);
const count = z.int().min(0);

const sequence = z.object({
  row_start: count,
  row_count: z.int().min(1),
  block_table: z.array(count),
});

export const REQUEST_SCHEMAS = {
  ping: z.object({ op: z.literal("ping") }),
  init: z.object({ op: z.literal("init"), comm_id: z.string() }),
  nccl_sanity_check: z.object({ op: z.literal("nccl_sanity_check") }),
  load_shard: z.object({
    op: z.literal("load_shard"),
    model_id: modelId,
    model_path: z.string().min(1),
    file_size: count.optional(),
    device: z.enum(["cpu", "cuda", "reference"]),
    threads: count,
    mmap: z.boolean().optional(),
    repack: z.boolean().optional(),
    kv: z.object({
      block_size: z.int().min(1),
      n_blocks: z.int().min(1),
      dtype: z.enum(["f16", "f32", "q8_0", "q4_0"]),
    }),
    rope_scaling: z.object({
      type: z.enum(["linear", "yarn"]),
      factor: z.number(),
      original_context_length: count.optional(),
    }).optional(),
  }),
  generate_step: z.object({
    op: z.literal("generate_step"),
    model_id: modelId,
    tokens: z.array(count).min(1),
    offset: count,
    positions: z.array(count).optional(),
    sequences: z.array(sequence).min(1).optional(),
  }),
  clear_kv_cache: z.object({ op: z.literal("clear_kv_cache"), model_id: modelId }),
  query_vram: z.object({ op: z.literal("query_vram") }),
  unload_model: z.object({ op: z.literal("unload_model"), model_id: modelId }),
  shutdown: z.object({ op: z.literal("shutdown") }),
} as const;

export type RequestOp = keyof typeof REQUEST_SCHEMAS;
export type RequestOf<Op extends RequestOp> = z.infer<(typeof REQUEST_SCHEMAS)[Op]>;
export type Request = { [Op in RequestOp]: RequestOf<Op> }[RequestOp];

export type Reply =
  | { op: "pong"; rank: number; world_size: number; cuda_device: number }
  | { op: "init_ok" }
  | { op: "nccl_sanity_result"; observed_sum: number }
  | { op: "load_shard_ok" }
  | { op: "generate_step_ok"; step?: number }
  | { op: "kv_cache_cleared" }
  | { op: "vram_info"; free_mb: number; total_mb: number }
  | { op: "unloaded" }
  | { op: "bye" }
  | ErrorReply;

export interface ErrorReply {
  op: "error";
  kind: WorkerErrorKind;
  message: string;
}

export type ReplyOp = Reply["op"];

/** The reply each request answers with when it succeeds. */
export const REPLY_OP: { readonly [Op in RequestOp]: Exclude<ReplyOp, "error"> } = {
  ping: "pong",
  init: "init_ok",
  nccl_sanity_check: "nccl_sanity_result",
  load_shard: "load_shard_ok",
  generate_step: "generate_step_ok",
  clear_kv_cache: "kv_cache_cleared",
  query_vram: "vram_info",
  unload_model: "unloaded",
  shutdown: "bye",
};

function isRequestOp(op: string): op is RequestOp {
  return Object.hasOwn(REQUEST_SCHEMAS, op);
}

function issueText(error: z.ZodError): string {
  const issue = error.issues[0];
  const path = issue.path.map(String).join(".");
  return `${path ? `${path}: ` : ""}${issue.message}`;
}

/** Parses one request line; `bad_request` saying what is wrong otherwise. */
export function parseRequest(line: string): Request {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new TpError("bad_request", `not a JSON object: ${JSON.stringify(line.slice(0, 120))}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TpError("bad_request", "a request must be a JSON object");
  }
  const op = (value as { op?: unknown }).op;
  if (typeof op !== "string") throw new TpError("bad_request", "the request has no string `op`");
  if (!isRequestOp(op)) throw new TpError("bad_request", `unknown op ${JSON.stringify(op)}`);
  const parsed = REQUEST_SCHEMAS[op].safeParse(value);
  if (!parsed.success) throw new TpError("bad_request", `${op}: ${issueText(parsed.error)}`);
  return parsed.data as Request;
}

const num = z.number();
const REPLY_SCHEMAS: { readonly [Op in ReplyOp]: z.ZodType } = {
  pong: z.object({ op: z.literal("pong"), rank: num, world_size: num, cuda_device: num }),
  init_ok: z.object({ op: z.literal("init_ok") }),
  nccl_sanity_result: z.object({ op: z.literal("nccl_sanity_result"), observed_sum: num }),
  load_shard_ok: z.object({ op: z.literal("load_shard_ok") }),
  generate_step_ok: z.object({ op: z.literal("generate_step_ok"), step: num.optional() }),
  kv_cache_cleared: z.object({ op: z.literal("kv_cache_cleared") }),
  vram_info: z.object({ op: z.literal("vram_info"), free_mb: num, total_mb: num }),
  unloaded: z.object({ op: z.literal("unloaded") }),
  bye: z.object({ op: z.literal("bye") }),
  error: z.object({
    op: z.literal("error"),
    kind: z.enum(WORKER_ERROR_KINDS),
    message: z.string(),
  }),
};

/**
 * Checks that `value` answers a request of `op`: its success reply or an error. A reason
 * otherwise (the caller treats the worker as broken).
 */
export function checkReply(op: RequestOp, value: unknown): Reply | string {
  const replyOp = (value as { op?: unknown } | null)?.op;
  if (replyOp !== REPLY_OP[op] && replyOp !== "error") {
    return `expected ${REPLY_OP[op]} or error in reply to ${op}, got ${JSON.stringify(value)}`;
  }
  const parsed = REPLY_SCHEMAS[replyOp as ReplyOp].safeParse(value);
  return parsed.success
    ? parsed.data as Reply
    : `malformed ${String(replyOp)}: ${issueText(parsed.error)}`;
}

export function errorReply(kind: WorkerErrorKind, message: string): ErrorReply {
  return { op: "error", kind, message };
}
