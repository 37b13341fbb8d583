/**
 * Fuzzing the reader: the fixture headers are cut at every field boundary, every field is
 * overwritten with hostile values (huge counts and lengths, bad types, dimensions whose
 * product overflows, unaligned, overlapping and out-of-file tensor offsets, bad
 * alignments, duplicate names) and random bytes are flipped, thousands of times. Every
 * case must end in a GgufError with a stable code and the offending byte offset, or in a
 * parse whose every tensor view lies inside the file; memory stays bounded.
 *
 * Cases mutate one buffer in place and restore it, and truncation is a subarray, so a case
 * costs only its parse: the bulk runs on a compact seed (the tiny Q8_0 fixture with its
 * vocabulary cut to 300 tokens), a bounded number on the real 6 MB headers.
 */

import { assert } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import {
  encodeGguf,
  GGUF_ERROR_CODES,
  GgufError,
  type GgufFile,
  type GgufKv,
  GgufValueType,
  Kv,
  openGguf,
  parseGgufBytes,
  Rng,
} from "../../src/gguf/mod.ts";
import { type Field, headerFields } from "./layout.ts";

/**
 * Exactly this many cases run, however long they take (the work is bounded, not the time):
 * the real headers' samples (540), every field of the seed (about 14,400), random changes.
 */
const CASES = 20_000;
const MAX_MEMORY_GROWTH = 512 * 2 ** 20;

/** A case: bytes to write at offsets, then parse the first `length` bytes. */
interface Case {
  label: string;
  patches: Array<[number, Uint8Array]>;
  length?: number;
}

function u32(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v >>> 0, true);
  return b;
}

function u64(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, v), true);
  return b;
}

/** The tiny Q8_0 fixture with its vocabulary cut short and every value type added. */
function compactSeed(): Uint8Array {
  const src = openGguf(fixture("qwen3-tiny-q8_0.gguf"));
  try {
    const keep = 300;
    const kv = new Map<string, GgufKv>(src.kv);
    for (
      const key of ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"]
    ) {
      const e = kv.get(key)!;
      kv.set(key, { ...e, value: (e.value as string[]).slice(0, keep) });
    }
    kv.set("general.alignment", Kv.u32(32));
    kv.set("fuzz.u64", Kv.u64(2n ** 63n));
    kv.set("fuzz.i64", Kv.i64(-3));
    kv.set("fuzz.f64", Kv.f64(0.5));
    kv.set("fuzz.i8", Kv.i8(-1));
    kv.set("fuzz.u16", Kv.u16(7));
    kv.set("fuzz.bools", Kv.array(GgufValueType.BOOL, [true, false]));
    kv.set(
      "fuzz.nested",
      Kv.array(GgufValueType.ARRAY, [new Int16Array([1, -1]), ["a", "bc"], [new Uint8Array([1])]]),
    );
    const tensors = src.tensors.map((t) => {
      const embd = t.name === "token_embd.weight";
      const ne = embd ? [t.ne[0], keep] : t.ne;
      const bytes = src.data(t);
      return {
        name: t.name,
        type: t.type,
        ne,
        data: embd ? bytes.slice(0, keep * (bytes.byteLength / t.ne[1])) : bytes.slice(),
      };
    });
    return encodeGguf({ kv, tensors });
  } finally {
    src.close();
  }
}

function readU64(bytes: Uint8Array, o: number): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(o, true);
}

/** Hostile values for one field, by kind. */
function fieldCases(bytes: Uint8Array, fields: Field[], i: number): Case[] {
  const f = fields[i];
  const at = (v: Uint8Array, label: string): Case => ({
    label: `${f.kind} of ${f.owner || "header"} @${f.offset} = ${label}`,
    patches: [[f.offset, v]],
  });
  const size = BigInt(bytes.byteLength);
  switch (f.kind) {
    case "magic":
      return [at(new TextEncoder().encode("GGUG"), "GGUG"), at(u32(0x47475546), "byte-swapped")];
    case "version":
      return [1, 2, 4, 0x03000000, 0xffffffff].map((v) => at(u32(v), String(v)));
    case "tensor_count":
    case "kv_count":
    case "string_length":
    case "array_length":
    case "tensor_offset": {
      const cur = readU64(bytes, f.offset);
      const values = [
        2n ** 64n - 1n,
        2n ** 63n,
        2n ** 53n + 1n,
        2n ** 32n,
        2n ** 32n - 1n,
        0n,
        1n,
        cur + 1n,
        cur * 2n,
        size - BigInt(f.offset),
        size,
      ];
      if (cur > 0n) values.push(cur - 1n);
      if (f.kind === "tensor_offset") values.push(cur + 32n, cur > 32n ? cur - 32n : 32n);
      return values.map((v) => at(u64(v), String(v)));
    }
    case "value_type":
    case "array_type":
      return [0, 4, 6, 7, 8, 9, 10, 12, 13, 0xffffffff].map((v) => at(u32(v), String(v)));
    case "tensor_type":
      return [0, 1, 2, 4, 5, 8, 12, 14, 30, 31, 39, 40, 0xffffffff].map((v) =>
        at(u32(v), String(v))
      );
    case "n_dims":
      return [0, 1, 3, 4, 5, 0xffffffff].map((v) => at(u32(v), String(v)));
    case "dim": {
      const cur = readU64(bytes, f.offset);
      const out = [-1n, 2n ** 63n - 1n, 2n ** 53n, 2n ** 32n, 0n, 1n, cur * 2n, cur + 1n].map((v) =>
        at(u64(v), String(v))
      );
      if (fields[i + 1]?.kind === "dim") {
        // Two dimensions of 2^32: the element count overflows 64 bits.
        out.push({
          label: `dims of ${f.owner} overflow`,
          patches: [[f.offset, u64(2n ** 32n)], [f.offset + 8, u64(2n ** 32n)]],
        });
      }
      return out;
    }
    case "scalar":
      if (f.owner === "general.alignment") {
        return [0, 1, 3, 48, 64, 2 ** 31, 0xffffffff].map((v) => at(u32(v), `alignment ${v}`));
      }
      return [at(new Uint8Array(f.size).fill(0xff), "all ones")];
    case "string_bytes": {
      const out = [at(new Uint8Array([0xff, 0xfe]).subarray(0, f.size), "invalid UTF-8")];
      // The same name as an earlier key or tensor of equal length: a duplicate.
      const twin = fields.find((g) =>
        g.kind === "string_bytes" && g.owner === f.owner && g.size === f.size && g.offset < f.offset
      );
      if (twin && (f.owner === "key" || f.owner === "tensor")) {
        out.push(at(bytes.slice(twin.offset, twin.offset + twin.size), "duplicate name"));
      }
      return out;
    }
  }
}

/** Truncation at and inside every field, then hostile values in every field. */
function* fieldSweep(bytes: Uint8Array, fields: Field[], every = 1): Generator<Case> {
  for (let i = 0; i < fields.length; i += every) {
    const f = fields[i];
    yield { label: `cut at ${f.kind} @${f.offset}`, patches: [], length: f.offset };
    if (f.size > 1) {
      yield {
        label: `cut inside ${f.kind} @${f.offset}`,
        patches: [],
        length: f.offset + (f.size >> 1),
      };
    }
  }
  for (let i = 0; i < fields.length; i += every) yield* fieldCases(bytes, fields, i);
}

/** Random changes in the header: bit flips, random bytes at field starts, anywhere, mixed with field cases. */
function* randomCases(bytes: Uint8Array, fields: Field[], end: number, rng: Rng): Generator<Case> {
  for (let k = 0;; k++) {
    const patches: Array<[number, Uint8Array]> = [];
    const n = 1 + rng.int(4);
    for (let j = 0; j < n; j++) {
      const r = rng.float();
      if (r < 0.4) {
        const pos = rng.int(end);
        patches.push([pos, new Uint8Array([bytes[pos] ^ (1 << rng.int(8))])]);
      } else {
        const f = fields[rng.int(fields.length)];
        const pos = r < 0.7 ? f.offset + rng.int(Math.min(f.size, 8)) : rng.int(end);
        patches.push([pos, new Uint8Array([rng.int(256)])]);
      }
    }
    if (k % 4 === 0) {
      const pool = fieldCases(bytes, fields, rng.int(fields.length));
      patches.push(...pool[rng.int(pool.length)].patches);
    }
    const length = k % 7 === 0 ? rng.int(bytes.byteLength) : undefined;
    yield {
      label: `random #${k}: ${patches.map(([o, b]) => `${o}=${b}`).join(" ")}`,
      patches,
      length,
    };
  }
}

/** What a successful parse must guarantee, whatever the bytes were. */
function checkParsed(file: GgufFile, size: number): void {
  let lastEnd = -1;
  const byOffset = [...file.tensors].sort((a, b) => a.offset - b.offset);
  for (const t of byOffset) {
    assert(t.ne.every((d) => Number.isSafeInteger(d) && d >= 0), `${t.name} has bad dimensions`);
    assert(Number.isSafeInteger(t.nBytes) && t.nBytes >= 0, `${t.name} has ${t.nBytes} bytes`);
    assert(
      t.offset >= file.dataOffset && t.offset + t.nBytes <= size,
      `${t.name} lies outside the file`,
    );
    assert(t.offset % file.alignment === 0, `${t.name} is unaligned`);
    assert(t.nElements === t.ne.reduce((a, b) => a * b, 1), `${t.name} element count`);
    assert(file.data(t).byteLength === t.nBytes, `${t.name} view size`);
    if (t.nBytes > 0) {
      assert(t.offset >= lastEnd, `${t.name} overlaps another tensor`);
      lastEnd = t.offset + t.nBytes;
    }
  }
}

const CODES = new Set<string>(GGUF_ERROR_CODES);

/** Runs one case on `buf` in place, restoring it after. Returns the outcome for the tally. */
function runCase(buf: Uint8Array, c: Case): string {
  const saved = c.patches.map(([o, b]) => [o, buf.slice(o, o + b.byteLength)] as const);
  for (const [o, b] of c.patches) buf.set(b.subarray(0, Math.max(0, buf.byteLength - o)), o);
  const length = Math.min(c.length ?? buf.byteLength, buf.byteLength);
  try {
    let file: GgufFile;
    try {
      file = parseGgufBytes(buf.subarray(0, length));
    } catch (err) {
      if (!(err instanceof GgufError)) {
        throw new Error(`${c.label}: ${err instanceof Error ? err.stack : String(err)}`);
      }
      assert(CODES.has(err.code), `${c.label}: unknown code ${err.code}`);
      assert(
        err.offset !== undefined && err.offset >= 0 && err.offset <= length,
        `${c.label}: ${err.code} without a valid offset (${err.offset}): ${err.message}`,
      );
      return err.code;
    }
    try {
      checkParsed(file, length);
    } catch (err) {
      throw new Error(`${c.label}: parsed into an unsound file: ${(err as Error).message}`);
    }
    return "parsed";
  } finally {
    // In reverse, so overlapping patches restore the original bytes.
    for (const [o, b] of saved.reverse()) buf.set(b, o);
  }
}

Deno.test("fuzzed GGUF headers end in a GgufError or a sound parse, in bounded memory", () => {
  const started = performance.now();
  // This isolate's heap and buffers: the process's RSS also counts the test modules that
  // run beside this one under --parallel.
  const memory = () => {
    const m = Deno.memoryUsage();
    return m.heapTotal + m.external;
  };
  const before = memory();
  const tally = new Map<string, number>();
  let cases = 0;
  let peak = before;
  const sampleMemory = () => {
    peak = Math.max(peak, memory());
  };
  const run = (buf: Uint8Array, gen: Iterable<Case>, limit: number) => {
    let n = 0;
    for (const c of gen) {
      if (n++ >= limit || cases >= CASES) return;
      const outcome = runCase(buf, c);
      tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
      if (++cases % 64 === 0) sampleMemory();
    }
  };

  // The real headers: every parse reads 6 MB of vocabulary, so only a sample of fields
  // (a few elements of each array, the first and last tensors) and of random changes.
  for (const name of ["qwen3-vocab.gguf", "qwen3-small-q4_k_m.gguf"]) {
    const buf = Deno.readFileSync(fixture(name));
    const { fields, end } = headerFields(buf, 3);
    const tensorsAt = fields.findIndex((f) => f.owner === "tensor");
    const sample = tensorsAt < 0 ? fields : [
      ...fields.slice(0, tensorsAt + 14),
      ...fields.slice(Math.max(tensorsAt + 14, fields.length - 14)),
    ];
    run(buf, fieldSweep(buf, sample), 250);
    run(buf, randomCases(buf, sample, end, new Rng(7)), 20);
    sampleMemory();
  }

  const seed = compactSeed();
  const pristine = seed.slice();
  const { fields, end } = headerFields(seed);
  run(seed, fieldSweep(seed, fields), CASES);
  run(seed, randomCases(seed, fields, end, new Rng(2024)), CASES);
  assert(seed.every((b, i) => b === pristine[i]), "a case left the seed changed");

  sampleMemory();
  const grown = peak - before;
  const summary = [...tally].map(([k, v]) => `${k}: ${v}`).join(", ");
  console.log(
    `${cases} cases in ${Math.round(performance.now() - started)} ms, peak memory +${
      Math.round(grown / 2 ** 20)
    } MiB: ${summary}`,
  );
  assert(cases === CASES, `${cases} cases ran, not ${CASES}`);
  assert((tally.get("parsed") ?? 0) > 0 && tally.size > 8, `outcomes too uniform: ${summary}`);
  assert(grown < MAX_MEMORY_GROWTH, `memory grew by ${grown} bytes`);
});
