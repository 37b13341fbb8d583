import { assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import type { StepLayout } from "../backend/backend.ts";
import { TpError } from "./errors.ts";
import { stepFromRequest, stepRequest } from "./step_message.ts";

const KV = { blockSize: 4, nBlocks: 16 };

Deno.test("step message: a batched step crosses unchanged, block tables cut to what is used", () => {
  const ids = Int32Array.of(11, 12, 13, 14);
  const layout: StepLayout = {
    positions: Int32Array.of(9, 0, 1, 2),
    sequences: [
      { rowStart: 0, rowCount: 1, blockTable: Int32Array.of(5, 6, 7, 8, 9) },
      { rowStart: 1, rowCount: 3, blockTable: Int32Array.of(2, 3) },
    ],
  };
  const req = stepRequest("m", ids, layout, KV.blockSize);
  assertEquals(req.sequences!.map((s) => s.block_table), [[5, 6, 7], [2]]);
  const back = stepFromRequest(JSON.parse(JSON.stringify(req)), 100, KV);
  assertEquals(back.ids, ids);
  assertEquals(back.layout.positions, layout.positions);
  assertEquals(back.layout.sequences.map((s) => [s.rowStart, s.rowCount, [...s.blockTable]]), [
    [0, 1, [5, 6, 7]],
    [1, 3, [2]],
  ]);
});

Deno.test("step message: WIRE's plain form is one sequence from `offset` over blocks 0, 1, ...", () => {
  const { layout } = stepFromRequest(
    { op: "generate_step", model_id: "m", tokens: [1, 2, 3], offset: 7 },
    100,
    KV,
  );
  assertEquals(layout.positions, Int32Array.of(7, 8, 9));
  assertEquals(layout.sequences.length, 1);
  assertEquals([...layout.sequences[0].blockTable], [0, 1, 2]);
});

Deno.test("step message: indices the kernels would trust are checked first", () => {
  const base = { op: "generate_step" as const, model_id: "m", tokens: [1, 2], offset: 0 };
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ tokens: [1, 100] }, /token 100 at 1 is outside the vocabulary/],
    [{ positions: [0] }, /1 positions for 2 tokens/],
    [{ offset: 64 }, /position 64 is past its 17 blocks|block 16 of a 16-block pool/],
    [
      { sequences: [{ row_start: 0, row_count: 1, block_table: [0] }] },
      /the sequences cover 1 of 2 rows/,
    ],
    [
      { sequences: [{ row_start: 1, row_count: 1, block_table: [0] }] },
      /sequence 0 covers rows 1..1, expected to start at 0/,
    ],
    [
      { sequences: [{ row_start: 0, row_count: 3, block_table: [0] }] },
      /expected to start at 0 and end by 1/,
    ],
    [{ sequences: [{ row_start: 0, row_count: 2, block_table: [16] }] }, /block 16 of a 16-block/],
    [
      { positions: [3, 4], sequences: [{ row_start: 0, row_count: 2, block_table: [0] }] },
      /position 4 is past its 1 blocks of 4/,
    ],
  ];
  for (const [patch, message] of cases) {
    const err = assertThrows(() => stepFromRequest({ ...base, ...patch }, 100, KV), TpError);
    assertEquals(err.code, "bad_request");
    assertMatch(err.message, message, JSON.stringify(patch));
  }
});
