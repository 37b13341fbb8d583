/**
 * Rope scaling read from a file's metadata as llama.cpp reads it, and the YaRN terms it
 * hands ggml: the Qwen3 128k setting, the defaults, linear scaling, and the refusals.
 */

import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { type GgufKv, Kv, openGguf, writeGguf } from "../gguf/mod.ts";
import { ArchKeys } from "./arch_keys.ts";
import { ModelError } from "./errors.ts";
import {
  overrideRopeScaling,
  readRopeScaling,
  type RopeScaling,
  type RopeScalingConfig,
  ropeYarn,
} from "./rope_scaling.ts";

/** The scaling of a file holding only `keys` under `qwen3.`. */
function scaling(keys: Record<string, GgufKv>): RopeScaling {
  const path = Deno.makeTempFileSync({ suffix: ".gguf" });
  try {
    writeGguf(path, { kv: Object.entries(keys).map(([k, v]) => [`qwen3.${k}`, v]), tensors: [] });
    const file = openGguf(path);
    try {
      return readRopeScaling(new ArchKeys(file, "qwen3"), 40960);
    } finally {
      file.close();
    }
  } finally {
    Deno.removeSync(path);
  }
}

const YARN = {
  "rope.scaling.type": Kv.string("yarn"),
  "rope.scaling.factor": Kv.f32(4),
  "rope.scaling.original_context_length": Kv.u32(32768),
};

Deno.test("rope scaling: Qwen3's YaRN (factor 4 over 32768) gives ggml's ramp and magnitude", () => {
  const s = scaling(YARN);
  assertEquals([s.type, s.freqScale, s.originalContext, s.attnFactor], ["yarn", 0.25, 32768, 1]);
  // 128-wide heads, base 1e6 (Qwen3-8B): ggml_rope_yarn_corr_dims gives pairs 23..40 for
  // beta 32 and 1; llama.cpp cancels then restores 1 + 0.1 ln 4.
  const y = ropeYarn(s, 1e6, 128)!;
  assertEquals([y.extFactor, y.low, y.high], [1, 23, 40]);
  assert(Math.abs(y.mscale - (1 + 0.1 * Math.log(4))) < 1e-6, `mscale ${y.mscale}`);
  // The tiny fixtures' 32-wide heads over 40960 positions: pairs 6..11.
  const tiny = ropeYarn(
    scaling({ ...YARN, "rope.scaling.original_context_length": Kv.u32(40960) }),
    1e6,
    32,
  )!;
  assertEquals([tiny.low, tiny.high], [6, 11]);
  // A short original context: the ramp would start below pair 0.
  const short = { ...YARN, "rope.scaling.original_context_length": Kv.u32(32) };
  const clamped = ropeYarn(scaling(short), 1e4, 128)!;
  assertEquals([clamped.low, clamped.high], [0, 12]);
});

Deno.test("rope scaling: YaRN without an original context takes the file's, and attn_factor scales it", () => {
  const { "rope.scaling.original_context_length": _, ...rest } = YARN;
  assertEquals(scaling(rest).originalContext, 40960);
  const y = ropeYarn(scaling({ ...YARN, "rope.scaling.attn_factor": Kv.f32(0.5) }), 1e6, 128)!;
  assert(Math.abs(y.mscale - 0.5 * (1 + 0.1 * Math.log(4))) < 1e-6, `mscale ${y.mscale}`);
});

Deno.test("rope scaling: none, defaults and linear are plain rotations; linear keeps attn_factor", () => {
  const none = scaling({
    "rope.scaling.type": Kv.string("none"),
    "rope.scaling.factor": Kv.f32(4),
  });
  assertEquals([none.freqScale, ropeYarn(none, 1e6, 128)], [1, null]);
  const plain = scaling({});
  assertEquals([plain.type, plain.freqScale, ropeYarn(plain, 1e6, 128)], ["linear", 1, null]);
  const linear = scaling({ "rope.scaling.factor": Kv.f32(8) });
  assertEquals([linear.type, linear.freqScale, ropeYarn(linear, 1e6, 128)], [
    "linear",
    0.125,
    null,
  ]);
  assertEquals(scaling({ "rope.scale_linear": Kv.f32(2) }).freqScale, 0.5);
  const damped = scaling({
    "rope.scaling.factor": Kv.f32(2),
    "rope.scaling.attn_factor": Kv.f32(0.75),
  });
  assertEquals(ropeYarn(damped, 1e4, 64), { extFactor: 0, low: 0, high: 0, mscale: 0.75 });
});

Deno.test("rope scaling: another type, or a factor or attention factor no model can have, is refused naming the key", () => {
  const refused = (keys: Record<string, GgufKv>): string =>
    assertThrows(() => scaling(keys), ModelError).message;
  for (const type of ["longrope", "dynamic", "llama3"]) {
    const message = refused({
      "rope.scaling.type": Kv.string(type),
      "rope.scaling.factor": Kv.f32(4),
    });
    assertEquals(
      message,
      `qwen3.rope.scaling.type '${type}' is not supported (none, linear and yarn are)`,
    );
  }
  assertEquals(
    refused({ ...YARN, "rope.scaling.factor": Kv.f32(-4) }),
    "qwen3.rope.scaling.factor must be a positive number, got -4",
  );
  assertEquals(
    refused({ ...YARN, "rope.scaling.attn_factor": Kv.f32(0) }),
    "qwen3.rope.scaling.attn_factor must be a positive number, got 0",
  );
  assertEquals(
    refused({ ...YARN, "rope.scaling.original_context_length": Kv.u32(0) }),
    "qwen3.rope.scaling.original_context_length must be a positive integer, got 0",
  );
  const error = assertThrows(
    () => scaling({ "rope.scaling.type": Kv.string("longrope") }),
    ModelError,
  );
  assertEquals(error.code, "bad_hparams");
});

Deno.test("rope scaling asked for at load replaces the file's: YaRN's context is the original times the factor", () => {
  const path = Deno.makeTempFileSync({ suffix: ".gguf" });
  try {
    writeGguf(path, {
      kv: [["general.architecture", Kv.string("qwen3")], ["qwen3.context_length", Kv.u32(40960)]],
      tensors: [],
    });
    const read = (config: RopeScalingConfig): [RopeScaling, number | undefined] => {
      const file = openGguf(path);
      try {
        overrideRopeScaling(file, config);
        return [
          readRopeScaling(new ArchKeys(file, "qwen3"), 40960),
          file.get("qwen3.context_length") as number,
        ];
      } finally {
        file.close();
      }
    };
    const [yarn, context] = read({ type: "yarn", factor: 4, originalContextLength: 32768 });
    assertEquals([yarn.type, yarn.freqScale, yarn.originalContext, context], [
      "yarn",
      0.25,
      32768,
      131072,
    ]);
    // No original context given: the file's own, as llama.cpp's --yarn-orig-ctx defaults.
    const [own, longer] = read({ type: "yarn", factor: 2 });
    assertEquals([own.originalContext, longer], [40960, 81920]);
    // Linear scaling leaves the context as the file says (llama.cpp re-adjusts it for YaRN only).
    const [linear, same] = read({ type: "linear", factor: 2 });
    assertEquals([linear.type, linear.freqScale, same], ["linear", 0.5, 40960]);
    assertEquals(
      assertThrows(() => read({ type: "yarn", factor: 0.5 }), ModelError).message,
      "rope scaling factor must be at least 1, got 0.5",
    );
  } finally {
    Deno.removeSync(path);
  }
});
