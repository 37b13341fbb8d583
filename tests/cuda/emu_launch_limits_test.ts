/**
 * The emulated cuLaunchKernel refuses what the real driver refuses, from the kernels' own
 * numbers (kernel_limits.ts): a block larger than the PTX's .maxntid, registers of a block
 * beyond the register file, dynamic shared memory beyond 48 KiB without the opt-in or beyond
 * the opt-in. Every other emulated test passing shows the backend's launches fit them.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { CudaDriver } from "../../src/backend/cuda/driver.ts";
import { CUDA_BUILD_DIR } from "../../kernels/build_cuda.ts";
import { kernelLimits } from "./emu/kernel_limits.ts";

const emu = await emulator();

const FUNC = {
  cuFuncGetAttribute: { parameters: ["buffer", "i32", "pointer"], result: "i32" },
  cuFuncSetAttribute: { parameters: ["pointer", "i32", "i32"], result: "i32" },
} as const;

const INVALID_VALUE = 1;
const LAUNCH_OUT_OF_RESOURCES = 701;
const ATTR = { maxThreads: 0, sharedSize: 1, numRegs: 4, maxDynamicShared: 8 };

interface Kernels {
  /** cuLaunchKernel's result for `name` on a 1-block grid. */
  launch(name: string, threads: number, shared: number, params?: bigint[]): number;
  get(name: string, attr: number): number;
  set(name: string, attr: number, value: number): number;
  alloc(bytes: number): bigint;
  sync(): number;
}

/** The sm_90 PTX modules loaded as a GPU of compute capability 9.0 would load them. */
function withKernels(fn: (k: Kernels) => void): void {
  resetEmulator(emu!);
  const driver = CudaDriver.open(emu!.lib);
  const func = Deno.dlopen(emu!.lib, FUNC);
  driver.retainPrimaryContext(0);
  const sym = driver.sym;
  const out = new BigUint64Array(1);
  const modules: Deno.PointerValue[] = [];
  const functions = new Map<string, Deno.PointerValue>();
  const buffers: number[] = [];
  try {
    for (const file of ["attention", "elementwise", "fused"]) {
      const ptx = Deno.readTextFileSync(`${CUDA_BUILD_DIR}sm_90/${file}.ptx`);
      const image = new TextEncoder().encode(`${ptx}\0`);
      driver.check("cuModuleLoadDataEx", sym.cuModuleLoadDataEx(out, image, 0, null, null));
      modules.push(Deno.UnsafePointer.create(out[0]));
    }
    const fnOf = (name: string): Deno.PointerValue => {
      if (!functions.has(name)) {
        const cname = new TextEncoder().encode(`${name}\0`);
        const rcs = modules.map((m) => sym.cuModuleGetFunction(out, m, cname));
        assert(rcs.includes(0), `${name} is in none of the modules`);
        functions.set(name, Deno.UnsafePointer.create(out[0]));
      }
      return functions.get(name)!;
    };
    const value = new Int32Array(1);
    fn({
      launch(name, threads, shared, params = []) {
        const slots = params.map((p) => new BigUint64Array([p]));
        const ptrs = new BigUint64Array(
          slots.map((s) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(s)))),
        );
        const argv = params.length ? Deno.UnsafePointer.of(ptrs) : null;
        return sym.cuLaunchKernel(fnOf(name), 1, 1, 1, threads, 1, 1, shared, null, argv, null);
      },
      get(name, attr) {
        driver.check(
          "cuFuncGetAttribute",
          func.symbols.cuFuncGetAttribute(value, attr, fnOf(name)),
        );
        return value[0];
      },
      set: (name, attr, v) => func.symbols.cuFuncSetAttribute(fnOf(name), attr, v),
      alloc(bytes) {
        const { ptr, rc } = driver.memAlloc(bytes);
        driver.check("cuMemAlloc", rc);
        buffers.push(ptr);
        return BigInt(ptr);
      },
      sync: () => sym.cuCtxSynchronize(),
    });
  } finally {
    for (const b of buffers) driver.memFree(b);
    for (const m of modules) sym.cuModuleUnload(m);
    resetEmulator(emu!);
    driver.releasePrimaryContext(0);
    func.close();
    driver.close();
  }
}

function test(name: string, fn: () => void): void {
  Deno.test({ name: `emulated CUDA launch limits: ${name}`, ignore: emu === null, fn });
}

/** An sm_90 kernel with a .maxntid below 1024, and one without. */
function bounded(): { name: string; maxThreads: number } {
  const k = kernelLimits().find((l) => l.arch === 90 && l.maxThreads < 1024 && l.maxThreads >= 64);
  assert(k !== undefined, "no sm_90 kernel declares __launch_bounds__");
  return k;
}

test("a block larger than the kernel's .maxntid is CUDA_ERROR_INVALID_VALUE", () => {
  const { name, maxThreads } = bounded();
  withKernels((k) => {
    assertEquals(k.get(name, ATTR.maxThreads), maxThreads);
    assertEquals(k.launch(name, maxThreads + 32, 0), INVALID_VALUE);
    assertEquals(k.launch(name, 1024, 0), INVALID_VALUE);
  });
});

test("registers x threads beyond the register file is LAUNCH_OUT_OF_RESOURCES", () => {
  withKernels((k) => {
    const regs = k.get("silu_mul", ATTR.numRegs);
    const table = kernelLimits().find((l) => l.arch === 90 && l.name === "silu_mul")!;
    assertEquals(regs, table.registers);
    // A register file that holds 256 threads of silu_mul (registers go 8 per thread at a
    // time, a warp at a time), as on a smaller GPU.
    const perThread = Math.ceil(regs / 8) * 8;
    emu!.control.set("regs_per_block", perThread * 256);
    assertEquals(k.get("silu_mul", ATTR.maxThreads), 256);
    assertEquals(k.launch("silu_mul", 288, 0), LAUNCH_OUT_OF_RESOURCES);
    // 257 threads take 9 warps' registers: refused too.
    assertEquals(k.launch("silu_mul", 257, 0), LAUNCH_OUT_OF_RESOURCES);
    const buf = k.alloc(4);
    assertEquals(k.launch("silu_mul", 256, 0, [buf, buf, buf, 0n]), 0);
    assertEquals(k.sync(), 0);
  });
});

test("the register counts are ptxas's own", async () => {
  const out = await new Deno.Command("ptxas", {
    args: ["-v", "-arch=sm_90", "-O3", `${CUDA_BUILD_DIR}sm_90/kv_store.ptx`, "-o", "/dev/null"],
    stderr: "piped",
    stdout: "piped",
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  const said = new Map<string, number>();
  let current = "";
  for (const line of text.split("\n")) {
    const entry = /Compiling entry function '(\w+)'/.exec(line);
    if (entry) current = entry[1];
    const used = /Used (\d+) registers/.exec(line);
    if (used) said.set(current, Number(used[1]));
  }
  assert(said.size >= 4, `ptxas -v named ${said.size} kernels`);
  const table = new Map(
    kernelLimits().filter((l) => l.arch === 90 && said.has(l.name)).map((
      l,
    ) => [l.name, l.registers]),
  );
  assertEquals(table, said);
});

test("dynamic shared memory past 48 KiB needs the opt-in, and stays within it", () => {
  withKernels((k) => {
    const buf = k.alloc(4);
    const args = [buf, buf, buf, 0n];
    assertEquals(k.get("silu_mul", ATTR.maxDynamicShared), 48 * 1024);
    assertEquals(k.launch("silu_mul", 64, 48 * 1024 + 16, args), INVALID_VALUE);
    assertEquals(k.set("silu_mul", ATTR.maxDynamicShared, 96 * 1024), 0);
    assertEquals(k.launch("silu_mul", 64, 96 * 1024, args), 0);
    assertEquals(k.launch("silu_mul", 64, 96 * 1024 + 16, args), INVALID_VALUE);
    // sm_90's opt-in limit, less the kernel's static shared memory.
    const room = 227 * 1024 - k.get("silu_mul", ATTR.sharedSize);
    assertEquals(k.set("silu_mul", ATTR.maxDynamicShared, room + 1), INVALID_VALUE);
    assertEquals(k.set("silu_mul", ATTR.maxDynamicShared, room), 0);
    assertEquals(k.launch("silu_mul", 64, room, args), 0);
    assertEquals(k.sync(), 0);
  });
});
