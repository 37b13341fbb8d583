import { assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import { COMM_ID_BYTES, commIdFromHex, commIdToHex } from "./comm_id.ts";
import { newCpuCommId, parseCpuCommId } from "./cpu_comm.ts";
import { TpError } from "./errors.ts";

Deno.test("comm id: 128 bytes <-> 256 lowercase hex characters, every byte value", () => {
  const id = Uint8Array.from({ length: COMM_ID_BYTES }, (_, i) => (i * 7 + 255) & 255);
  id[0] = 0;
  id[1] = 255;
  const hex = commIdToHex(id);
  assertMatch(hex, /^[0-9a-f]{256}$/);
  assertEquals(hex.slice(0, 4), "00ff");
  assertEquals(commIdFromHex(hex), id);
  assertEquals(commIdFromHex(hex.toUpperCase()), id);
});

Deno.test("comm id: wrong lengths and non-hex characters are bad requests that say why", () => {
  const cases: Array<[string, RegExp]> = [
    ["", /256 hex characters, got 0/],
    ["ab".repeat(127), /got 254/],
    ["ab".repeat(129), /got 258/],
    ["ab".repeat(127) + "zz", /non-hex character "z" at 254/],
    ["0x" + "ab".repeat(127), /non-hex character "x" at 1/],
  ];
  for (const [hex, message] of cases) {
    const err = assertThrows(() => commIdFromHex(hex), TpError);
    assertEquals(err.code, "bad_request");
    assertMatch(err.message, message);
  }
  assertThrows(() => commIdToHex(new Uint8Array(127)), TpError);
});

Deno.test("comm id: a CPU id names its world size and a fresh segment; other ids are not CPU ids", () => {
  const a = newCpuCommId(4);
  const b = newCpuCommId(4);
  assertEquals(a.id.length, COMM_ID_BYTES);
  const parsed = parseCpuCommId(commIdFromHex(commIdToHex(a.id)));
  assertEquals(parsed, a.parts);
  assertEquals(parsed?.world, 4);
  assertMatch(a.parts.name, /^\/neuron-tp-[0-9a-f]{32}$/);
  assertEquals(a.parts.name === b.parts.name, false, "every group gets its own segment");
  // An NCCL unique id (opaque bytes) is never mistaken for a CPU one.
  const nccl = crypto.getRandomValues(new Uint8Array(COMM_ID_BYTES));
  assertEquals(parseCpuCommId(nccl), null);
  assertEquals(parseCpuCommId(new Uint8Array(COMM_ID_BYTES)), null);
});
