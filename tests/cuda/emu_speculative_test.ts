/**
 * Speculative verification on the emulated GPU: a decode run of k + 1 positions for one
 * sequence (its own graphs, one per draft length seen) gives the tokens plain decoding
 * gives, greedy, beside another sequence's plain decode. The model is small (the emulated
 * output projection stays cheap) and copies (designed successors, tests/bench/
 * copying_model.ts), so every choice is decisive: rows computed together differ from rows
 * computed alone in the last bits, and a random model's near-ties would flip on that.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { SMALL_SHAPE } from "../gpu/checks/model.ts";
import { writeCopyingModel } from "../bench/copying_model.ts";
import {
  delta,
  FORCED,
  generate,
  ids,
  OFF,
  request,
  submit,
  withEngine,
} from "../engine/spec_support.ts";

const emu = await emulator();
const dir = emu ? await Deno.makeTempDir() : "";
const copying = emu ? writeCopyingModel(`${dir}/copying.gguf`, SMALL_SHAPE) : null;

Deno.test({
  name: "emulated CUDA: speculative verification gives plain decoding's tokens",
  ignore: emu === null,
  fn() {
    resetEmulator(emu!);
    withEngine(copying!.path, (engine) => {
      const base = [5, 77, 300, 12, 9, 41, 250, 3];
      const chain = ids(generate(engine, request("chain", base, 16, OFF)));
      const prompt = [...base, ...chain, ...base];
      const other = [7, 8, 9, 10, 11];
      const plain = ids(generate(engine, request("p", prompt, 20, OFF)));
      const otherPlain = ids(generate(engine, request("q", other, 20, OFF)));
      const before = engine.stats();
      const a = submit(engine, request("s", prompt, 20, FORCED));
      const b = submit(engine, request("o", other, 20, OFF));
      while (engine.hasWork) engine.step();
      const d = delta(engine.stats(), before);
      assertEquals(ids(a), plain);
      assertEquals(ids(b), otherPlain);
      assert(d.specVerifications > 0 && d.specDrafted > 0, JSON.stringify(d));
      assertEquals(engine.stats().kvBlocksUsed, 0);
    }, { runner: emu!.runner, stepTargetMs: Infinity });
  },
});
