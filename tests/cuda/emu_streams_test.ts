/**
 * The emulator's stream model: work issued on a stream runs when the host waits for it, as
 * on a GPU, so a missing synchronisation gives a wrong result here instead of passing by
 * luck. Each check runs the correct sequence, and the same one with its wait dropped, which
 * must come out wrong. Device memory is host memory in the emulator: the checks read it
 * directly, after the waits they are about.
 */

import { assertEquals } from "../support/assert.ts";
import { emulator } from "./support.ts";
import { CudaDriver } from "../../src/backend/cuda/driver.ts";
import {
  CU_EVENT_DISABLE_TIMING,
  CU_STREAM_NON_BLOCKING,
} from "../../src/backend/cuda/driver_symbols.ts";
import { DeviceMemory } from "../../src/backend/cuda/memory.ts";
import { StepArena } from "../../src/backend/cuda/arena.ts";

const emu = await emulator();

/** What the backend does not bind: waits between streams. */
const EXTRA = {
  cuStreamWaitEvent: { parameters: ["pointer", "pointer", "u32"], result: "i32" },
  cuEventQuery: { parameters: ["pointer"], result: "i32" },
} as const;

interface Device {
  driver: CudaDriver;
  extra: Deno.DynamicLibrary<typeof EXTRA>["symbols"];
  stream(): Deno.PointerValue;
  /** `bytes` of device memory, and a view of them. */
  alloc(bytes: number): { ptr: number; view: Uint8Array };
  /** `bytes` of pinned host memory, and a view of it. */
  host(bytes: number): { ptr: Deno.PointerObject; view: Uint8Array };
  sync(stream: Deno.PointerValue): void;
}

function test(name: string, fn: (d: Device) => void): void {
  Deno.test({
    name: `emulated CUDA streams: ${name}`,
    ignore: emu === null,
    fn() {
      const driver = CudaDriver.open(emu!.lib);
      const lib = Deno.dlopen(emu!.lib, EXTRA);
      const undo: Array<() => void> = [];
      driver.retainPrimaryContext(0);
      const d: Device = {
        driver,
        extra: lib.symbols,
        stream() {
          const s = driver.streamCreate(CU_STREAM_NON_BLOCKING);
          undo.push(() => driver.check("cuStreamDestroy", driver.sym.cuStreamDestroy_v2(s)));
          return s;
        },
        alloc(bytes) {
          const { ptr, rc } = driver.memAlloc(bytes);
          driver.check("cuMemAlloc", rc);
          undo.push(() => driver.memFree(ptr));
          const p = Deno.UnsafePointer.create(BigInt(ptr))!;
          return { ptr, view: new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(p, bytes)) };
        },
        host(bytes) {
          const { ptr, buffer } = driver.memAllocHost(bytes);
          undo.push(() => driver.memFreeHost(ptr));
          return { ptr, view: new Uint8Array(buffer) };
        },
        sync(stream) {
          driver.check("cuStreamSynchronize", driver.sym.cuStreamSynchronize(stream));
        },
      };
      try {
        fn(d);
      } finally {
        for (const u of undo.reverse()) u();
        driver.releasePrimaryContext(0);
        lib.close();
        driver.close();
      }
    },
  });
}

/** Copies `host` to device `dev` on `stream`, then writes `next` into `host`; waits for the
 * stream before the rewrite only when `wait`. What the device holds after a final wait. */
function stagedCopy(d: Device, wait: boolean): number[] {
  const s = d.stream();
  const dev = d.alloc(4);
  const host = d.host(4);
  host.view.set([1, 2, 3, 4]);
  d.driver.check(
    "cuMemcpyHtoDAsync",
    d.driver.sym.cuMemcpyHtoDAsync_v2(BigInt(dev.ptr), host.ptr, 4n, s),
  );
  if (wait) d.sync(s);
  host.view.set([9, 9, 9, 9]);
  d.sync(s);
  return [...dev.view];
}

test("a host staging buffer reused before the copy's wait reaches the device reused", (d) => {
  assertEquals(stagedCopy(d, true), [1, 2, 3, 4]);
  // The dropped wait: the copy reads the host bytes when it runs, after the rewrite.
  assertEquals(stagedCopy(d, false), [9, 9, 9, 9]);
});

test("a device-to-host copy's destination holds its bytes only after the wait", (d) => {
  const s = d.stream();
  const dev = d.alloc(8);
  const host = d.host(8);
  host.view.fill(0);
  d.driver.check("cuMemsetD8Async", d.driver.sym.cuMemsetD8Async(BigInt(dev.ptr), 7, 8n, s));
  d.driver.check(
    "cuMemcpyDtoHAsync",
    d.driver.sym.cuMemcpyDtoHAsync_v2(host.ptr, BigInt(dev.ptr), 8n, s),
  );
  // Read before the wait (the dropped synchronisation): nothing has arrived yet.
  assertEquals([...host.view], [0, 0, 0, 0, 0, 0, 0, 0]);
  d.sync(s);
  assertEquals([...host.view], [7, 7, 7, 7, 7, 7, 7, 7]);
});

/** Stream `b` copies what stream `a` uploads; `b` waits for `a`'s event only when `wait`.
 * What `b`'s copy delivered, after waiting for `b` alone. */
function crossStream(d: Device, wait: boolean): number[] {
  const a = d.stream(), b = d.stream();
  const src = d.alloc(4), dst = d.alloc(4);
  const host = d.host(4);
  src.view.fill(0);
  dst.view.fill(0);
  host.view.set([5, 6, 7, 8]);
  const ev = d.driver.eventCreate(CU_EVENT_DISABLE_TIMING);
  try {
    const sym = d.driver.sym;
    d.driver.check("cuMemcpyHtoDAsync", sym.cuMemcpyHtoDAsync_v2(BigInt(src.ptr), host.ptr, 4n, a));
    d.driver.check("cuEventRecord", sym.cuEventRecord(ev, a));
    if (wait) d.driver.check("cuStreamWaitEvent", d.extra.cuStreamWaitEvent(b, ev, 0));
    d.driver.check(
      "cuMemcpyDtoDAsync",
      sym.cuMemcpyDtoDAsync_v2(BigInt(dst.ptr), BigInt(src.ptr), 4n, b),
    );
    d.sync(b);
    return [...dst.view];
  } finally {
    d.driver.check("cuEventDestroy", d.driver.sym.cuEventDestroy_v2(ev));
  }
}

test("cuStreamWaitEvent orders one stream after another's recorded work", (d) => {
  assertEquals(crossStream(d, true), [5, 6, 7, 8]);
  // Without the wait the second stream's copy runs before the first stream's upload.
  assertEquals(crossStream(d, false), [0, 0, 0, 0]);
});

test("cuEventSynchronize waits for the work before the record, not after it", (d) => {
  const s = d.stream();
  const dev = d.alloc(2);
  const early = d.host(1), late = d.host(1);
  early.view[0] = late.view[0] = 0;
  dev.view.set([3, 4]);
  const sym = d.driver.sym;
  const ev = d.driver.eventCreate(CU_EVENT_DISABLE_TIMING);
  try {
    d.driver.check(
      "cuMemcpyDtoHAsync",
      sym.cuMemcpyDtoHAsync_v2(early.ptr, BigInt(dev.ptr), 1n, s),
    );
    d.driver.check("cuEventRecord", sym.cuEventRecord(ev, s));
    d.driver.check(
      "cuMemcpyDtoHAsync",
      sym.cuMemcpyDtoHAsync_v2(late.ptr, BigInt(dev.ptr + 1), 1n, s),
    );
    // 600 = CUDA_ERROR_NOT_READY: nothing has waited for the record yet.
    assertEquals(d.extra.cuEventQuery(ev), 600);
    d.driver.check("cuEventSynchronize", sym.cuEventSynchronize(ev));
    assertEquals([early.view[0], late.view[0]], [3, 0]);
    assertEquals(d.extra.cuEventQuery(ev), 0);
    d.sync(s);
    assertEquals(late.view[0], 4);
  } finally {
    d.driver.check("cuEventDestroy", sym.cuEventDestroy_v2(ev));
  }
});

test("the step arena waits for its upload before writing the next step's data", (d) => {
  const s = d.stream();
  const memory = new DeviceMemory(d.driver, () => d.sync(s));
  const arena = new StepArena(d.driver, memory, 4096);
  try {
    const first = arena.put(Int32Array.of(11, 12, 13));
    arena.upload(s);
    // The next step's data goes to the same offset of the same host buffer, while the first
    // upload is still queued: put() must wait for it, or the device would get 21, 22, 23.
    const second = arena.put(Int32Array.of(21, 22, 23));
    assertEquals(second, first);
    d.sync(s);
    const view = new Int32Array(
      Deno.UnsafePointerView.getArrayBuffer(Deno.UnsafePointer.create(BigInt(first))!, 12),
    );
    assertEquals([...view], [11, 12, 13]);
  } finally {
    arena.close();
    memory.releaseAll();
  }
});
