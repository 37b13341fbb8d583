/**
 * Constrained greedy decoding on the emulated GPU: the masked argmax runs after each step's
 * kernels (decode steps replayed as graphs, the masks new in the step arena every step)
 * and picks what the logits path picks (logits read back, `restrict`, argmax on the host),
 * beside a free sequence. The model copies (tests/bench/copying_model.ts), so its choices
 * are decisive; the constraint allows a different fifth of the vocabulary at every token.
 */

import { assertEquals, assertNotEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { SMALL_SHAPE } from "../gpu/checks/model.ts";
import { writeCopyingModel } from "../bench/copying_model.ts";
import { generate, ids, OFF, request, submit, withEngine } from "../engine/spec_support.ts";
import type { TokenFilter } from "../../src/engine/mod.ts";

const emu = await emulator();
const dir = emu ? await Deno.makeTempDir() : "";
const copying = emu ? writeCopyingModel(`${dir}/copying.gguf`, SMALL_SHAPE) : null;
const VOCAB = SMALL_SHAPE.vocab;

/** Allows at its t-th token the ids i with (3i + t) % 5 == 0; `native` gives the bitsets. */
class Rotating implements TokenFilter {
  taken: number[] = [];
  readonly allowed?: (vocabSize: number) => Uint32Array | null;

  constructor(native: boolean) {
    if (native) this.allowed = (v) => v === VOCAB ? this.#bits() : null;
  }

  #allows(id: number): boolean {
    return (3 * id + this.taken.length) % 5 === 0;
  }

  #bits(): Uint32Array {
    const bits = new Uint32Array(VOCAB / 32);
    for (let i = 0; i < VOCAB; i++) if (this.#allows(i)) bits[i >>> 5] |= 1 << (i & 31);
    return bits;
  }

  restrict(logits: Float32Array, from = logits): boolean {
    for (let i = 0; i < logits.length; i++) logits[i] = this.#allows(i) ? from[i] : -Infinity;
    return true;
  }

  accept(id: number): void {
    if (!this.#allows(id)) throw new Error(`token ${id} was not allowed`);
    this.taken.push(id);
  }
}

Deno.test({
  name: "emulated CUDA: constrained greedy under device masks picks what the logits path picks",
  ignore: emu === null,
  fn() {
    resetEmulator(emu!);
    const base = [5, 77, 300, 12, 9, 41, 250, 3];
    const other = [7, 8, 9, 10, 11];
    const run = (native: boolean): { constrained: number[]; free: number[]; plain: number[] } =>
      withEngine(copying!.path, (engine) => {
        const plain = ids(generate(engine, request("p", base, 20, OFF)));
        const a = submit(engine, request("c", base, 20, OFF, { filter: new Rotating(native) }));
        const b = submit(engine, request("f", other, 20, OFF));
        while (engine.hasWork) engine.step();
        return { constrained: ids(a), free: ids(b), plain };
      }, { runner: emu!.runner, stepTargetMs: Infinity });
    const native = run(true);
    const logits = run(false);
    assertEquals(native.constrained.length, 20);
    assertEquals(native.constrained, logits.constrained);
    assertEquals(native.free, logits.free);
    assertNotEquals(native.constrained, native.plain);
  },
});
