/**
 * The CUDA build: PTX for every flavour, each assembled by ptxas for its target, PTX ISA
 * no newer than a CUDA 13.0 driver loads, and every kernel the backend launches present
 * with exactly the parameter types it passes. Skipped, with a notice, without nvcc.
 */

import { assert, assertEquals } from "../support/assert.ts";
import {
  buildCudaKernels,
  MAX_PTX_ISA,
  nvccAvailable,
  ptxEntries,
  ptxVersion,
} from "../../kernels/build_cuda.ts";
import { FLAVOURS } from "../../src/backend/cuda/flavour.ts";
import { KERNEL_SIGNATURES, paramLayout, PTX_PARAM_TYPE } from "../../src/backend/cuda/kernels.ts";

const hasNvcc = await nvccAvailable();
if (!hasNvcc) console.warn("NOTICE tests/cuda: nvcc not found: the PTX build is not checked here");

Deno.test({
  name: "PTX builds for sm_89, sm_90 and sm_120, passes ptxas, and is PTX ISA <= 9.0",
  ignore: !hasNvcc,
  async fn() {
    const { manifests } = await buildCudaKernels();
    assertEquals(manifests.map((m) => m.flavour).sort(), FLAVOURS.map((f) => f.name).sort());
    for (const m of manifests) {
      const [major, minor] = m.ptxVersion.split(".").map(Number);
      assert(
        major < MAX_PTX_ISA[0] || (major === MAX_PTX_ISA[0] && minor <= MAX_PTX_ISA[1]),
        `${m.flavour}: PTX ISA ${m.ptxVersion}`,
      );
      const dir = new URL(`../../kernels/build/${m.flavour}/`, import.meta.url);
      for (const mod of m.modules) {
        const ptx = Deno.readTextFileSync(new URL(mod.ptx, dir));
        assert(
          ptx.includes(`.target ${m.flavour}`),
          `${m.flavour}/${mod.ptx} targets ${m.flavour}`,
        );
        const cubin = Deno.readFileSync(new URL(mod.cubin, dir));
        assertEquals([...cubin.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], `${mod.cubin} is an ELF`);
      }
    }
  },
});

Deno.test({
  name: "every kernel the backend launches is in every flavour with the parameters it passes",
  ignore: !hasNvcc,
  async fn() {
    const { manifests } = await buildCudaKernels();
    for (const m of manifests) {
      const found: Record<string, string[]> = {};
      for (const mod of m.modules) Object.assign(found, mod.entries);
      for (const [name, sig] of Object.entries(KERNEL_SIGNATURES)) {
        assert(found[name] !== undefined, `${m.flavour}: kernel ${name} missing`);
        assertEquals(found[name], [...sig].map((k) => PTX_PARAM_TYPE[k]), `${m.flavour}: ${name}`);
      }
    }
  },
});

/** Each `.entry`'s body (up to its closing brace at the start of a line). */
function entryBodies(ptx: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /\.entry\s+(\w+)\s*\(/g;
  for (let m = re.exec(ptx); m !== null; m = re.exec(ptx)) {
    const end = ptx.indexOf("\n}", m.index);
    out.set(m[1], ptx.slice(m.index, end < 0 ? ptx.length : end));
  }
  return out;
}

Deno.test({
  name: "mat-vec kernels read weights through the read-only path (ld.global.nc), and the " +
    "K-quant ones load no single bytes",
  ignore: !hasNvcc,
  async fn() {
    const { manifests } = await buildCudaKernels();
    for (const m of manifests) {
      const dir = new URL(`../../kernels/build/${m.flavour}/`, import.meta.url);
      let checked = 0;
      for (const mod of m.modules.filter((x) => x.name === "matvec" || x.name === "moe")) {
        const ptx = Deno.readTextFileSync(new URL(mod.ptx, dir));
        for (const [name, body] of entryBodies(ptx)) {
          if (!name.startsWith("mmv")) continue;
          checked++;
          assert(body.includes("ld.global.nc."), `${m.flavour}: ${name} has no ld.global.nc`);
          if (/_q[2-6]_k_/.test(name)) {
            assert(!/ld\.global(\.nc)?\.[us]8/.test(body), `${m.flavour}: ${name} loads bytes`);
          }
        }
      }
      assert(checked >= 120, `${m.flavour}: only ${checked} mat-vec kernels found`);
    }
  },
});

Deno.test("PTX parsing: version and entry parameter lists", () => {
  const ptx = `//\n.version 9.0\n.target sm_90\n.address_size 64\n` +
    `.visible .entry k1(\n\t.param .u64 k1_param_0,\n\t.param .u32 k1_param_1,\n` +
    `\t.param .f32 k1_param_2\n)\n{ ret; }\n.visible .entry k2()\n{ ret; }\n`;
  assertEquals(ptxVersion(ptx), "9.0");
  assertEquals(ptxEntries(ptx), { k1: ["u64", "u32", "f32"], k2: [] });
});

Deno.test("kernel parameters are laid out as the driver reads them (pointers 8-byte aligned)", () => {
  assertEquals(paramLayout("pip"), { offsets: [0, 2, 4], words: 6 });
  assertEquals(paramLayout("ipp"), { offsets: [0, 2, 4], words: 6 });
  assertEquals(paramLayout("iifp"), { offsets: [0, 1, 2, 4], words: 6 });
  assertEquals(paramLayout(""), { offsets: [], words: 0 });
});
