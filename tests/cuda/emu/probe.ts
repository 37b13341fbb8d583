/**
 * Runs one of the emulator's own probe kernels (order_probe.cc, bounds_probe.cc): they are
 * registered in the emulator but in none of our images, so this loads a PTX stub naming
 * just the probe, on a context of its own, launches it on the legacy stream and waits.
 */

import { CudaDriver } from "../../../src/backend/cuda/driver.ts";

export interface ProbeLaunch {
  grid: [number, number];
  block: number;
  /** Device memory for the probe, as i32 words; its address goes to `params`. */
  words: number;
  /** The kernel's parameters (each 8 bytes), given the address of its memory. */
  params: (memory: bigint) => bigint[];
}

/** What the probe left in its memory. */
export function runProbe(lib: string, name: string, launch: ProbeLaunch): Int32Array {
  const driver = CudaDriver.open(lib);
  driver.retainPrimaryContext(0);
  const sym = driver.sym;
  const bytes = 4 * launch.words;
  const { ptr, rc } = driver.memAlloc(bytes);
  driver.check("cuMemAlloc", rc);
  const out = new BigUint64Array(1);
  try {
    const image = new TextEncoder().encode(`.version 8.0\n.entry ${name}(\n\0`);
    driver.check("cuModuleLoadDataEx", sym.cuModuleLoadDataEx(out, image, 0, null, null));
    const mod = Deno.UnsafePointer.create(out[0]);
    const cname = new TextEncoder().encode(`${name}\0`);
    driver.check("cuModuleGetFunction", sym.cuModuleGetFunction(out, mod, cname));
    const fn = Deno.UnsafePointer.create(out[0]);
    const view = new Int32Array(
      Deno.UnsafePointerView.getArrayBuffer(Deno.UnsafePointer.create(BigInt(ptr))!, bytes),
    );
    view.fill(0);
    const slots = launch.params(BigInt(ptr)).map((p) => new BigUint64Array([p]));
    const argv = new BigUint64Array(
      slots.map((s) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(s)))),
    );
    const [gx, gy] = launch.grid;
    driver.check(
      "cuLaunchKernel",
      sym.cuLaunchKernel(
        fn,
        gx,
        gy,
        1,
        launch.block,
        1,
        1,
        0,
        null,
        Deno.UnsafePointer.of(argv),
        null,
      ),
    );
    driver.check("cuCtxSynchronize", sym.cuCtxSynchronize());
    driver.check("cuModuleUnload", sym.cuModuleUnload(mod));
    return view.slice();
  } finally {
    driver.memFree(ptr);
    driver.releasePrimaryContext(0);
    driver.close();
  }
}
