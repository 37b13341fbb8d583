/**
 * The data every rank of a communicator test contributes, and the sums they must all see:
 * rank r holds r + 1 + (i % 7) / 8 at index i (exact in f16 and f32), so a sum over n
 * ranks is n(n+1)/2 + n (i % 7) / 8 — exact too, so results compare with ===.
 */
import type { Communicator } from "../../../src/tp/communicator.ts";
import { f16ToF32, f32ToF16 } from "../../../src/gguf/mod.ts";

/** Larger than one 512 KiB slot, so chunking and slot sets are exercised. */
export const BIG = 300_000;

export function ptr(a: ArrayBufferView): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(a)));
}

export function fillPattern(x: Float32Array, rank: number): void {
  for (let i = 0; i < x.length; i++) x[i] = rank + 1 + (i % 7) / 8;
}

function expected(i: number, world: number): number {
  return (world * (world + 1)) / 2 + (world * (i % 7)) / 8;
}

/** Runs one collective of `what` on `comm` and lists what came out wrong. */
export function checkPattern(comm: Communicator, what: "f32" | "f16" | "broadcast"): string[] {
  const world = comm.size;
  if (what === "f32") {
    const x = new Float32Array(BIG);
    fillPattern(x, comm.rank);
    comm.allReduceSum(ptr(x), x.length, "f32", null);
    const bad = x.findIndex((v, i) => v !== expected(i, world));
    return bad < 0 ? [] : [`f32[${bad}] = ${x[bad]}, expected ${expected(bad, world)}`];
  }
  if (what === "f16") {
    const n = 5000;
    const x = new Uint16Array(n);
    for (let i = 0; i < n; i++) x[i] = f32ToF16(comm.rank + 1 + (i % 7) / 8);
    comm.allReduceSum(ptr(x), n, "f16", null);
    for (let i = 0; i < n; i++) {
      if (f16ToF32(x[i]) !== expected(i, world)) {
        return [`f16[${i}] = ${f16ToF32(x[i])}, expected ${expected(i, world)}`];
      }
    }
    return [];
  }
  const bytes = new Uint8Array(700_000);
  const root = world - 1;
  if (comm.rank === root) { for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31) & 255; }
  comm.broadcast(ptr(bytes), bytes.length, root, null);
  const bad = bytes.findIndex((b, i) => b !== ((i * 31) & 255));
  return bad < 0 ? [] : [`broadcast[${bad}] = ${bytes[bad]}`];
}
