import { assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import { TpError } from "./errors.ts";
import { checkReply, parseRequest, type Reply, REPLY_OP, type Request } from "./protocol.ts";

const HEX = "ab".repeat(128);

/** One valid request of every op, as a leader sends them. */
const REQUESTS: Request[] = [
  { op: "ping" },
  { op: "init", comm_id: HEX },
  { op: "nccl_sanity_check" },
  {
    op: "load_shard",
    model_id: "m",
    model_path: "/models/m.gguf",
    file_size: 123,
    device: "cpu",
    threads: 2,
    kv: { block_size: 16, n_blocks: 64, dtype: "f16" },
  },
  {
    op: "load_shard",
    model_id: "m",
    model_path: "/models/m.gguf",
    device: "cuda",
    threads: 0,
    kv: { block_size: 16, n_blocks: 8192, dtype: "f16" },
    rope_scaling: { type: "yarn", factor: 4, original_context_length: 32768 },
  },
  { op: "generate_step", model_id: "m", tokens: [1, 2], offset: 5 },
  {
    op: "generate_step",
    model_id: "m",
    tokens: [1, 2, 3],
    offset: 4,
    positions: [4, 0, 1],
    sequences: [
      { row_start: 0, row_count: 1, block_table: [3] },
      { row_start: 1, row_count: 2, block_table: [7] },
    ],
  },
  { op: "clear_kv_cache", model_id: "m" },
  { op: "query_vram" },
  { op: "unload_model", model_id: "m" },
  { op: "shutdown" },
];

/** A success reply of every op. */
const REPLIES: Reply[] = [
  { op: "pong", rank: 1, world_size: 2, cuda_device: 1 },
  { op: "init_ok" },
  { op: "nccl_sanity_result", observed_sum: 2 },
  { op: "load_shard_ok" },
  { op: "generate_step_ok", step: 3 },
  { op: "kv_cache_cleared" },
  { op: "vram_info", free_mb: 10, total_mb: 20 },
  { op: "unloaded" },
  { op: "bye" },
];

Deno.test("protocol: every op parses back to itself; every reply checks against its request", () => {
  for (const req of REQUESTS) {
    assertEquals(parseRequest(JSON.stringify(req)), req);
    const reply = REPLIES.find((r) => r.op === REPLY_OP[req.op])!;
    assertEquals(checkReply(req.op, JSON.parse(JSON.stringify(reply))), reply);
    const error: Reply = { op: "error", kind: "forward_failed", message: "x" };
    assertEquals(checkReply(req.op, error), error);
  }
  assertEquals(Object.keys(REPLY_OP).sort(), [...new Set(REQUESTS.map((r) => r.op))].sort());
});

Deno.test("protocol: bad lines and unknown ops are bad_request naming the problem", () => {
  const cases: Array<[string, RegExp]> = [
    ["", /not a JSON object/],
    ["{", /not a JSON object: "\{"/],
    ["[1]", /must be a JSON object/],
    ["null", /must be a JSON object/],
    ['{"op":7}', /no string `op`/],
    ['{"op":"frobnicate"}', /unknown op "frobnicate"/],
    ['{"op":"init"}', /^init: comm_id: /],
    ['{"op":"init","comm_id":5}', /^init: comm_id: /],
    ['{"op":"generate_step","model_id":"m","tokens":[],"offset":0}', /tokens: /],
    ['{"op":"generate_step","model_id":"m","tokens":[-1],"offset":0}', /tokens\.0: /],
    ['{"op":"generate_step","model_id":"m","tokens":[1.5],"offset":0}', /tokens\.0: /],
    [
      '{"op":"load_shard","model_id":"m","model_path":"p","device":"auto","threads":0,' +
      '"kv":{"block_size":16,"n_blocks":1,"dtype":"f16"}}',
      /device: /,
    ],
    ['{"op":"unload_model"}', /model_id: /],
  ];
  for (const [line, message] of cases) {
    const err = assertThrows(() => parseRequest(line), TpError);
    assertEquals(err.code, "bad_request", line);
    assertMatch(err.message, message, line);
  }
});

Deno.test("protocol: replies of the wrong op or shape are refused with the reason", () => {
  assertMatch(
    checkReply("generate_step", { op: "pong", rank: 1, world_size: 2, cuda_device: 1 }) as string,
    /expected generate_step_ok or error in reply to generate_step/,
  );
  assertMatch(checkReply("ping", { op: "pong", rank: "1" }) as string, /malformed pong: rank/);
  assertMatch(checkReply("ping", "pong") as string, /expected pong or error/);
  assertMatch(checkReply("ping", null) as string, /expected pong or error/);
  assertMatch(
    checkReply("init", { op: "error", kind: "on_fire", message: "x" }) as string,
    /malformed error: kind/,
  );
});
