/**
 * The kernels the backend launches, with their parameter lists, and their loading from
 * the build's modules. A signature is one letter per parameter: `p` a device pointer
 * (PTX .u64), `i` an int (.u32), `f` a float (.f32). Loading checks every signature
 * against the PTX's own parameter list, so a kernel whose C signature drifted from this
 * table fails at start instead of reading garbage.
 *
 * Launch parameters are written as 32-bit words into one staging buffer at fixed offsets
 * (8-byte aligned for pointers), and each kernel keeps a ready-made `void *params[]`
 * pointing into it, so a launch is a word copy and one FFI call.
 */

import { CudaError } from "./errors.ts";
import type { CudaDriver } from "./driver.ts";
import { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES } from "./driver_symbols.ts";
import type { FlavourManifest } from "./assets.ts";

const QUANT_TYPES = [
  "q4_0",
  "q4_1",
  "q5_0",
  "q5_1",
  "q8_0",
  "q2_k",
  "q3_k",
  "q4_k",
  "q5_k",
  "q6_k",
];
const FLOAT_TYPES = ["f32", "f16", "bf16"];
/** The KV cache types (KvDType): each has its store and attention kernels. */
const KV_TYPES = ["f32", "f16", "q8_0", "q4_0"];
/** Token counts the mat-vec kernels are instantiated for. */
export const MATVEC_TOKENS = [1, 4, 8] as const;
/** Rows at a time the expert kernels (moe.cu) are instantiated for. */
export const EXPERT_TOKENS = [1, 8] as const;
/** The weight types moe_gemm.cu has a tiled expert product for: all q8_1 units but Q2_K's. */
export const TILED_EXPERT_TYPES: readonly string[] = QUANT_TYPES.filter((t) => t !== "q2_k");

function signatures(): Record<string, string> {
  const s: Record<string, string> = {
    quantize_q8_1: "pppiii",
    mmv_any: "ppipiiii",
    rms_norm_warp: "pppiif",
    rms_norm_block: "pppiif",
    rope: "pppiiiffffffi",
    silu_mul: "pppi",
    gelu_mul: "pppi",
    add_f32: "pppi",
    add_bias: "pppii",
    scale_f32: "ppfi",
    hadamard_rows: "pi",
    gather_rows: "pppii",
    get_rows: "ppipiii",
    dequant_f16: "ppiiii",
    f32_to_f16_rows: "pppii",
    unscale_rows: "ppii",
    argmax_part: "ppppiii",
    argmax_final: "ppppiii",
    attn_combine: "ppppiii",
    q8_0_round: "ppi",
    attn_combine_q8: "ppppppiiii",
    rms_norm_q8: "pppppiiif",
    add_rms_norm: "pppppiif",
    add_rms_norm_q8: "pppppppiiif",
    rms_norm_rope: "ppppiiifffffffi",
    moe_route: "pppiiiippp",
    moe_group: "ppppiii",
    moe_combine: "pppiii",
    mmv_any_e: "ppiippppiiiii",
  };
  for (const t of KV_TYPES) {
    s[`kv_store_${t}`] = "pppppppiiii";
    s[`attn_split_${t}`] = "ppppppppiiiiiifi";
    s[`attn_prefill_${t}`] = "ppppppiiiiiifi";
  }
  for (const t of TILED_EXPERT_TYPES) s[`mmq_e_${t}`] = "ppipppppiiiiii";
  for (const nt of EXPERT_TOKENS) {
    for (const t of QUANT_TYPES) s[`mmvq_e_${t}_${nt}`] = "ppipppppiiiiiii";
    for (const t of QUANT_TYPES) s[`mmvq_e_gu_${t}_${nt}`] = "pppppipppppiiiiiii";
    for (const t of FLOAT_TYPES) s[`mmv_e_${t}_${nt}`] = "ppippppiiiiii";
  }
  for (const nt of MATVEC_TOKENS) {
    for (const t of QUANT_TYPES) {
      s[`mmvq_${t}_${nt}`] = "ppppiiiiii";
      s[`mmvq_gu_${t}_${nt}`] = "pppppppiiiiii";
      s[`mmvq3_${t}_${nt}`] = "ppppppiiippiiiii";
    }
    for (const t of FLOAT_TYPES) s[`mmv_${t}_${nt}`] = "pppiiiii";
  }
  return s;
}

/** Every kernel the backend may launch, by name. */
export const KERNEL_SIGNATURES: Readonly<Record<string, string>> = signatures();

export const PTX_PARAM_TYPE: Readonly<Record<string, string>> = { p: "u64", i: "u32", f: "f32" };

/** Word offset of each parameter in the staging buffer, and the total words. */
export function paramLayout(sig: string): { offsets: number[]; words: number } {
  const offsets: number[] = [];
  let w = 0;
  for (const kind of sig) {
    if (kind === "p") {
      w += w & 1;
      offsets.push(w);
      w += 2;
    } else {
      offsets.push(w);
      w += 1;
    }
  }
  return { offsets, words: w };
}

export interface Kernel {
  /** Position in the set (how the tape names it). */
  readonly index: number;
  readonly name: string;
  readonly sig: string;
  readonly offsets: Int32Array;
  readonly words: number;
  readonly fn: Deno.PointerValue;
  /** `void *params[]` into the staging buffer. */
  readonly params: Deno.PointerValue;
}

/** Words of the staging buffer: more than any kernel's parameters. */
export const STAGING_WORDS = 64;

/**
 * Words whose address native code keeps: an explicit ArrayBuffer's store never moves,
 * unlike a small typed array's, which V8 may keep on its moving heap.
 */
function offHeap(words: number): Uint32Array {
  return new Uint32Array(new ArrayBuffer(4 * words));
}

export class KernelSet {
  readonly byName = new Map<string, Kernel>();
  readonly list: Kernel[] = [];
  /** Where a launch's parameter words are copied before cuLaunchKernel reads them. */
  readonly staging = offHeap(STAGING_WORDS);
  readonly #modules: Deno.PointerValue[] = [];
  readonly #paramArrays: BigUint64Array[] = [];
  readonly #driver: CudaDriver;

  private constructor(driver: CudaDriver) {
    this.#driver = driver;
  }

  /**
   * Loads every module of a flavour (`image(module)` gives its cubin or PTX bytes) and
   * resolves every kernel of KERNEL_SIGNATURES, checking its parameters against the PTX.
   */
  static load(
    driver: CudaDriver,
    manifest: FlavourManifest,
    image: (module: FlavourManifest["modules"][number]) => Uint8Array,
  ): KernelSet {
    const set = new KernelSet(driver);
    try {
      const stagingBase = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(set.staging)));
      for (const mod of manifest.modules) {
        const handle = set.#loadModule(mod.name, image(mod));
        for (const [name, ptxParams] of Object.entries(mod.entries)) {
          const sig = KERNEL_SIGNATURES[name];
          if (sig === undefined) continue;
          const expected = [...sig].map((k) => PTX_PARAM_TYPE[k]);
          if (expected.join(",") !== ptxParams.join(",")) {
            throw new CudaError(
              "cuda_error",
              `kernel ${name} takes (${ptxParams.join(", ")}) in ${manifest.flavour}/${mod.ptx} ` +
                `but the backend passes (${expected.join(", ")})`,
            );
          }
          set.#addKernel(name, sig, handle, stagingBase);
        }
      }
      const missing = Object.keys(KERNEL_SIGNATURES).filter((n) => !set.byName.has(n));
      if (missing.length > 0) {
        throw new CudaError(
          "cuda_error",
          `kernels missing from the ${manifest.flavour} build: ${missing.join(", ")} ` +
            "(rebuild with `deno task kernels:cuda`)",
        );
      }
    } catch (err) {
      set.unload();
      throw err;
    }
    return set;
  }

  #loadModule(name: string, bytes: Uint8Array): Deno.PointerValue {
    const image = new Uint8Array(bytes.length + 1);
    image.set(bytes);
    const log = new Uint8Array(16384);
    const options = new Int32Array([CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]);
    const values = new BigUint64Array([
      BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(log))),
      BigInt(log.length),
    ]);
    const out = new BigUint64Array(1);
    const rc = this.#driver.sym.cuModuleLoadDataEx(out, image, 2, options, values);
    if (rc !== 0) {
      const end = log.indexOf(0);
      const text = new TextDecoder().decode(log.subarray(0, end < 0 ? log.length : end)).trim();
      throw new CudaError(
        "cuda_error",
        `loading kernel module ${name} failed: ${this.#driver.describe(rc)}` +
          (text ? `\n${text}` : ""),
        rc,
      );
    }
    const handle = Deno.UnsafePointer.create(out[0]);
    this.#modules.push(handle);
    return handle;
  }

  #addKernel(name: string, sig: string, module: Deno.PointerValue, stagingBase: bigint): void {
    const out = new BigUint64Array(1);
    const cname = new TextEncoder().encode(`${name}\0`);
    this.#driver.check(
      `cuModuleGetFunction(${name})`,
      this.#driver.sym.cuModuleGetFunction(out, module, cname),
    );
    const { offsets, words } = paramLayout(sig);
    const params = new BigUint64Array(new ArrayBuffer(8 * Math.max(1, offsets.length)));
    offsets.forEach((o, i) => params[i] = stagingBase + BigInt(4 * o));
    this.#paramArrays.push(params);
    const kernel: Kernel = {
      index: this.list.length,
      name,
      sig,
      offsets: Int32Array.from(offsets),
      words,
      fn: Deno.UnsafePointer.create(out[0]),
      params: Deno.UnsafePointer.of(params),
    };
    this.list.push(kernel);
    this.byName.set(name, kernel);
  }

  get(name: string): Kernel {
    const k = this.byName.get(name);
    if (k === undefined) throw new CudaError("cuda_error", `unknown kernel ${name}`);
    return k;
  }

  unload(): void {
    for (const m of this.#modules.splice(0)) {
      this.#driver.check("cuModuleUnload", this.#driver.sym.cuModuleUnload(m));
    }
  }
}
