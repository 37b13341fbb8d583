/**
 * Decode attention over 4k- and 16k-position caches on the emulated GPU against the
 * reference (tests/gpu/checks/long_attention.ts says what each case holds).
 */

import { emulator } from "./support.ts";
import { Pair } from "../gpu/checks/pair.ts";
import {
  checkLongDecode,
  describeLongDecode,
  LONG_DECODE_CASES,
} from "../gpu/checks/long_attention.ts";

const emu = await emulator();

for (const c of LONG_DECODE_CASES) {
  Deno.test({
    name: `emulated CUDA: ${describeLongDecode(c)}`,
    ignore: emu === null,
    fn() {
      const be = emu!.backend();
      try {
        checkLongDecode(new Pair(be), c);
      } finally {
        be.close();
      }
    },
  });
}
