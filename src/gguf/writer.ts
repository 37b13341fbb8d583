/**
 * GGUF writer (v3 by default): typed metadata, tensor infos, then each tensor's data at
 * the next multiple of `general.alignment` (32 when absent), padded with zeros, the same
 * layout llama.cpp and gguf-py write. Tensor data is streamed: a tensor may give a
 * producer instead of bytes, so multi-gigabyte files never sit in memory. A file is
 * written beside its destination and renamed into place only when complete.
 */

import { BlockBuffer } from "../common/block_buffer.ts";
import { ByteBuilder, encodeKv } from "./encode.ts";
import { GgufError } from "./errors.ts";
import { GGML_MAX_DIMS, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, type GgufKv } from "./file.ts";
import { type GgmlTypeInfo, ggmlTypeInfo, GgufValueType } from "./types.ts";

/** Receives a tensor's bytes in order, in chunks of any size. */
export type ChunkSink = (chunk: Uint8Array) => void;

export interface GgufTensorSpec {
  name: string;
  type: GgmlTypeInfo | number;
  /** Dimensions in ggml order (ne[0] is the row length). */
  ne: number[];
  /** The bytes, or a producer that passes exactly the tensor's bytes to `write`. */
  data: Uint8Array | ((write: ChunkSink) => void);
}

export interface GgufSpec {
  /** Metadata in file order; `general.alignment` (u32) sets the data alignment. */
  kv: Iterable<[string, GgufKv]>;
  tensors: GgufTensorSpec[];
  /** 3 unless told; 2 has the same layout. */
  version?: 2 | 3;
}

/** Where a tensor landed. */
export interface GgufWrittenTensor {
  name: string;
  type: GgmlTypeInfo;
  ne: number[];
  /** Absolute offset of its data. */
  offset: number;
  nBytes: number;
}

export interface GgufLayout {
  alignment: number;
  dataOffset: number;
  size: number;
  tensors: GgufWrittenTensor[];
}

interface Planned {
  header: Uint8Array;
  layout: GgufLayout;
}

function alignmentOf(kv: Map<string, GgufKv>): number {
  const a = kv.get("general.alignment");
  if (a === undefined) return GGUF_DEFAULT_ALIGNMENT;
  const v = a.value;
  if (a.type !== GgufValueType.UINT32 || typeof v !== "number" || v <= 0 || (v & (v - 1))) {
    throw new GgufError("gguf_bad_alignment", `general.alignment must be a power-of-two u32`);
  }
  return v;
}

function tensorType(spec: GgufTensorSpec): GgmlTypeInfo {
  const t = typeof spec.type === "number" ? ggmlTypeInfo(spec.type) : spec.type;
  if (t === undefined) {
    throw new GgufError(
      "gguf_unknown_tensor_type",
      `tensor '${spec.name}' has unknown type ${spec.type}`,
    );
  }
  return t;
}

function tensorBytes(spec: GgufTensorSpec, type: GgmlTypeInfo): number {
  const { name, ne } = spec;
  if (ne.length > GGML_MAX_DIMS || ne.some((d) => !Number.isSafeInteger(d) || d < 0)) {
    throw new GgufError("gguf_bad_tensor", `tensor '${name}' has invalid dimensions [${ne}]`);
  }
  const n = ne.reduce((a, b) => a * b, 1);
  if (!Number.isSafeInteger(n)) {
    throw new GgufError("gguf_too_large", `tensor '${name}' has too many elements`);
  }
  if ((ne[0] ?? 1) % type.blockSize !== 0) {
    throw new GgufError(
      "gguf_bad_tensor",
      `tensor '${name}' rows of ${
        ne[0] ?? 1
      } are not whole ${type.name} blocks (${type.blockSize})`,
    );
  }
  return (n / type.blockSize) * type.typeSize;
}

/** Encodes the header and computes where every tensor goes. */
function plan(spec: GgufSpec): Planned {
  const kv = new Map(spec.kv);
  const alignment = alignmentOf(kv);
  const out = new ByteBuilder();
  out.u32(GGUF_MAGIC);
  out.u32(spec.version ?? 3);
  out.u64(BigInt(spec.tensors.length));
  out.u64(BigInt(kv.size));
  for (const [key, value] of kv) encodeKv(out, key, value);

  const seen = new Set<string>();
  const tensors: GgufWrittenTensor[] = [];
  let relative = 0;
  for (const t of spec.tensors) {
    if (seen.has(t.name)) {
      throw new GgufError("gguf_duplicate_tensor", `duplicate tensor '${t.name}'`);
    }
    seen.add(t.name);
    const type = tensorType(t);
    const nBytes = tensorBytes(t, type);
    out.string(t.name);
    out.u32(t.ne.length);
    for (const d of t.ne) out.i64(BigInt(d));
    out.u32(type.id);
    out.u64(BigInt(relative));
    tensors.push({ name: t.name, type, ne: [...t.ne], offset: relative, nBytes });
    relative += Math.ceil(nBytes / alignment) * alignment;
  }
  const dataOffset = Math.ceil(out.length / alignment) * alignment;
  // An empty data section needs no padding before it: gguf-py ends such files right here.
  if (tensors.length > 0) out.pad(alignment);
  for (const t of tensors) t.offset += dataOffset;
  return {
    header: out.view(),
    layout: { alignment, dataOffset, size: out.length + relative, tensors },
  };
}

/** Streams header, tensor data and padding to `sink`, checking each tensor's size. */
function emit(spec: GgufSpec, planned: Planned, sink: ChunkSink): void {
  sink(planned.header);
  const zeros = new Uint8Array(planned.layout.alignment);
  planned.layout.tensors.forEach((t, i) => {
    const data = spec.tensors[i].data;
    let written = 0;
    const write: ChunkSink = (chunk) => {
      written += chunk.byteLength;
      if (written > t.nBytes) {
        throw new GgufError(
          "gguf_bad_tensor",
          `tensor '${t.name}' got more than ${t.nBytes} bytes`,
        );
      }
      sink(chunk);
    };
    if (data instanceof Uint8Array) write(data);
    else data(write);
    if (written !== t.nBytes) {
      throw new GgufError(
        "gguf_bad_tensor",
        `tensor '${t.name}' got ${written} bytes, its shape needs ${t.nBytes}`,
      );
    }
    const pad = (planned.layout.alignment - (t.nBytes % planned.layout.alignment)) %
      planned.layout.alignment;
    if (pad > 0) sink(zeros.subarray(0, pad));
  });
}

/** The whole file in memory (tests, small fixtures). */
export function encodeGguf(spec: GgufSpec): Uint8Array {
  const planned = plan(spec);
  const out = new Uint8Array(planned.layout.size);
  let pos = 0;
  emit(spec, planned, (chunk) => {
    out.set(chunk, pos);
    pos += chunk.byteLength;
  });
  return out;
}

/** Writes chunks to `file` in whole aligned blocks (block_buffer.ts says why). */
function fileSink(file: Deno.FsFile): { sink: ChunkSink; flush(): void } {
  const blocks = new BlockBuffer();
  const writeAll = (b: Uint8Array) => {
    for (let off = 0; off < b.byteLength;) off += file.writeSync(b.subarray(off));
  };
  return {
    sink: (chunk) => {
      for (const block of blocks.fill(chunk)) writeAll(block);
    },
    flush: () => writeAll(blocks.rest()),
  };
}

/** Writes a GGUF file to `path`, streaming tensor data; nothing is left behind on failure. */
export function writeGguf(path: string, spec: GgufSpec): GgufLayout {
  const planned = plan(spec);
  const tmp = `${path}.partial-${Deno.pid}`;
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(tmp, { write: true, create: true, truncate: true });
  } catch (err) {
    throw new GgufError("gguf_io", `cannot create ${tmp}: ${(err as Error).message}`, undefined, {
      cause: err,
    });
  }
  let open = true;
  try {
    const { sink, flush } = fileSink(file);
    emit(spec, planned, sink);
    flush();
    file.close();
    open = false;
    Deno.renameSync(tmp, path);
  } catch (err) {
    if (open) file.close();
    Deno.removeSync(tmp);
    if (err instanceof GgufError) throw err;
    throw new GgufError("gguf_io", `cannot write ${path}: ${(err as Error).message}`, undefined, {
      cause: err,
    });
  }
  return planned.layout;
}
